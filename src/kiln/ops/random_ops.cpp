// Random ops: uniform, normal and randint draw a tensor of the shape their
// attribute gives (sizes that may be symbolic, like view's), uniform_like
// and normal_like one shaped like their input. Kernels draw from the default
// generator when they run, exactly as the fill helpers of core/random.h do,
// so a compiled graph draws new numbers on every call and the same numbers
// as eager code from one seed. Their outputs carry no gradient.
#include "kiln/ops/random.h"

#include <algorithm>
#include <vector>

#include "kiln/ops/dispatch.h"

namespace kiln {
namespace {

void check_floating_dtype(const InferArgs& args, DType dtype) {
  KILN_CHECK_TYPE(is_floating(dtype), args.op.name, ": expected a floating dtype, got ", dtype);
}

// The shape attribute: static sizes must be non-negative (a symbolic one is
// a size of some input, so it is).
DimList shape_attr(const InferArgs& args) {
  DimList shape = args.attrs.get_dims("shape");
  for (const Dim& d : shape) {
    KILN_CHECK_VALUE(d.is_symbolic() || d.static_value() >= 0, args.op.name,
                     ": negative size in shape ", shape);
  }
  return shape;
}

// The dtype a _like op draws in: its attribute, else its input's.
DType like_dtype(const InferArgs& args) {
  return args.attrs.has("dtype") ? args.attrs.get_dtype("dtype") : args.inputs[0].dtype;
}

void check_uniform_range(const InferArgs& args) {
  double low = args.attrs.get_float("low"), high = args.attrs.get_float("high");
  KILN_CHECK_VALUE(low <= high, args.op.name, ": expected low <= high, got low=", low,
                   " high=", high);
}

void check_normal_std(const InferArgs& args) {
  double std = args.attrs.get_float("std");
  KILN_CHECK_VALUE(std >= 0, args.op.name, ": expected std >= 0, got ", std);
}

InferResult infer_uniform(const InferArgs& args) {
  DType dtype = args.attrs.get_dtype("dtype");
  check_floating_dtype(args, dtype);
  check_uniform_range(args);
  return InferResult{{TensorMeta{dtype, shape_attr(args)}}, {}};
}

InferResult infer_normal(const InferArgs& args) {
  DType dtype = args.attrs.get_dtype("dtype");
  check_floating_dtype(args, dtype);
  check_normal_std(args);
  return InferResult{{TensorMeta{dtype, shape_attr(args)}}, {}};
}

InferResult infer_uniform_like(const InferArgs& args) {
  DType dtype = like_dtype(args);
  check_floating_dtype(args, dtype);
  check_uniform_range(args);
  return InferResult{{TensorMeta{dtype, args.inputs[0].shape}}, {}};
}

InferResult infer_normal_like(const InferArgs& args) {
  DType dtype = like_dtype(args);
  check_floating_dtype(args, dtype);
  check_normal_std(args);
  return InferResult{{TensorMeta{dtype, args.inputs[0].shape}}, {}};
}

InferResult infer_randint(const InferArgs& args) {
  int64_t low = args.attrs.get_int("low"), high = args.attrs.get_int("high");
  KILN_CHECK_VALUE(low < high, "randint: expected low < high, got low=", low, " high=", high);
  return InferResult{{TensorMeta{args.attrs.get_dtype("dtype"), shape_attr(args)}}, {}};
}

// Outputs are fresh contiguous buffers (dispatch's or a plan's), filled in
// order as the fill helpers do: that is what keeps eager and compiled equal.
void uniform_kernel(const KernelArgs& args) {
  const cpu::StridedView& out = args.outputs[0];
  double low = args.attrs.get_float("low"), high = args.attrs.get_float("high");
  visit_floating(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    fill_uniform(default_generator(), out.ptr<T>(), out.numel(), low, high);
  });
}

void normal_kernel(const KernelArgs& args) {
  const cpu::StridedView& out = args.outputs[0];
  double mean = args.attrs.get_float("mean"), std = args.attrs.get_float("std");
  visit_floating(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    fill_normal(default_generator(), out.ptr<T>(), out.numel(), mean, std);
  });
}

void randint_kernel(const KernelArgs& args) {
  const cpu::StridedView& out = args.outputs[0];
  int64_t low = args.attrs.get_int("low"), high = args.attrs.get_int("high");
  if (out.dtype == DType::Int64) {
    fill_randint(default_generator(), out.ptr<int64_t>(), out.numel(), low, high);
    return;
  }
  std::vector<int64_t> drawn(size_t(out.numel()));
  fill_randint(default_generator(), drawn.data(), out.numel(), low, high);
  visit_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    std::copy(drawn.begin(), drawn.end(), out.ptr<T>());
  });
}

const AttrValue kNone = std::monostate{};

// An op of this file, before its attributes and rules.
OpDef random_op(std::string name, int num_inputs) {
  return OpDef{.name = std::move(name),
               .min_inputs = num_inputs,
               .max_inputs = num_inputs,
               .kind = OpKind::Opaque,
               .is_random = true,
               .differentiable = false};
}

Tensor with_grad_flag(Tensor t, const TensorOptions& options) {
  t.impl()->requires_grad = options.requires_grad;
  return t;
}

Tensor draw(const char* op_name, Attrs attrs, const TensorOptions& options) {
  return with_grad_flag(dispatch1(op(op_name), {}, attrs), options);
}

Tensor draw_like(const char* op_name, const Tensor& t, Attrs attrs, const TensorOptions& options) {
  attrs.set("dtype", options.dtype);
  return with_grad_flag(dispatch1(op(op_name), {t}, attrs), options);
}

bool own_generator(Generator* gen) {
  return gen != nullptr && gen != &default_generator();
}

}  // namespace

void register_random_ops(OpRegistry& registry) {
  // Attributes in PyTorch's order: kiln.uniform(low, high, shape),
  // kiln.normal(mean, std, shape), kiln.randint(low, high, shape). ONNX:
  // RandomUniform and RandomNormal (over symbolic sizes, their *Like forms).
  OpDef uniform = random_op("uniform", 0);
  uniform.attrs = {{"low", AttrKind::Float, 0.0},
                   {"high", AttrKind::Float, 1.0},
                   {"shape", AttrKind::Ints, kNone},
                   {"dtype", AttrKind::DType, kDefaultFloat}};
  uniform.infer = infer_uniform;
  uniform.cpu = uniform_kernel;
  uniform.onnx = {"RandomUniform"};
  registry.add(std::move(uniform));

  OpDef normal = random_op("normal", 0);
  normal.attrs = {{"mean", AttrKind::Float, 0.0},
                  {"std", AttrKind::Float, 1.0},
                  {"shape", AttrKind::Ints, kNone},
                  {"dtype", AttrKind::DType, kDefaultFloat}};
  normal.infer = infer_normal;
  normal.cpu = normal_kernel;
  normal.onnx = {"RandomNormal"};
  registry.add(std::move(normal));

  // The input lends its shape (and, without a dtype, its dtype) only.
  OpDef uniform_like = random_op("uniform_like", 1);
  uniform_like.attrs = {{"low", AttrKind::Float, 0.0},
                        {"high", AttrKind::Float, 1.0},
                        {"dtype", AttrKind::DType, kNone, true}};
  uniform_like.infer = infer_uniform_like;
  uniform_like.cpu = uniform_kernel;
  uniform_like.onnx = {"RandomUniformLike"};
  registry.add(std::move(uniform_like));

  OpDef normal_like = random_op("normal_like", 1);
  normal_like.attrs = {{"mean", AttrKind::Float, 0.0},
                       {"std", AttrKind::Float, 1.0},
                       {"dtype", AttrKind::DType, kNone, true}};
  normal_like.infer = infer_normal_like;
  normal_like.cpu = normal_kernel;
  normal_like.onnx = {"RandomNormalLike"};
  registry.add(std::move(normal_like));

  // ONNX has no random integers: not exportable (the exporter names the op).
  OpDef randint = random_op("randint", 0);
  randint.attrs = {{"low", AttrKind::Int, int64_t(0)},
                   {"high", AttrKind::Int, kNone},
                   {"shape", AttrKind::Ints, kNone},
                   {"dtype", AttrKind::DType, DType::Int64}};
  randint.infer = infer_randint;
  randint.cpu = randint_kernel;
  randint.onnx = {""};
  registry.add(std::move(randint));
}

// ---------------------------------------------------------------- factories

Tensor rand(const IntList& shape, TensorOptions options, Generator* gen,
            std::source_location where) {
  if (!own_generator(gen)) return rand(to_dims(shape), options);
  report_random_draw("rand", where);
  KILN_CHECK_TYPE(is_floating(options.dtype), "rand: expected a floating dtype, got ",
                  options.dtype);
  Tensor t = empty(shape, options);
  visit_floating(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    fill_uniform(*gen, static_cast<T*>(t.data_ptr()), t.numel(), 0.0, 1.0);
  });
  return t;
}

Tensor randn(const IntList& shape, TensorOptions options, Generator* gen,
             std::source_location where) {
  if (!own_generator(gen)) return randn(to_dims(shape), options);
  report_random_draw("randn", where);
  KILN_CHECK_TYPE(is_floating(options.dtype), "randn: expected a floating dtype, got ",
                  options.dtype);
  Tensor t = empty(shape, options);
  visit_floating(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    fill_normal(*gen, static_cast<T*>(t.data_ptr()), t.numel(), 0.0, 1.0);
  });
  return t;
}

Tensor randint(int64_t low, int64_t high, const IntList& shape, TensorOptions options,
               Generator* gen, std::source_location where) {
  if (!own_generator(gen)) return randint(low, high, to_dims(shape), options);
  report_random_draw("randint", where);
  Tensor drawn = make_tensor(shape, DType::Int64);
  fill_randint(*gen, drawn.data<int64_t>(), drawn.numel(), low, high);
  if (options.dtype == DType::Int64) return with_grad_flag(drawn, options);
  return tensor_from_data(drawn.data_ptr(), DType::Int64, shape, options);
}

Tensor rand(std::span<const Dim> shape, TensorOptions options) {
  return draw("uniform", {{"shape", DimList(shape.begin(), shape.end())}, {"dtype", options.dtype}},
              options);
}

Tensor randn(std::span<const Dim> shape, TensorOptions options) {
  return draw("normal", {{"shape", DimList(shape.begin(), shape.end())}, {"dtype", options.dtype}},
              options);
}

Tensor randint(int64_t low, int64_t high, std::span<const Dim> shape, TensorOptions options) {
  return draw("randint",
              {{"low", low},
               {"high", high},
               {"shape", DimList(shape.begin(), shape.end())},
               {"dtype", options.dtype}},
              options);
}

Tensor rand_like(const Tensor& t) {
  return rand_like(t, t.dtype());
}
Tensor rand_like(const Tensor& t, TensorOptions options) {
  return draw_like("uniform_like", t, {}, options);
}
Tensor randn_like(const Tensor& t) {
  return randn_like(t, t.dtype());
}
Tensor randn_like(const Tensor& t, TensorOptions options) {
  return draw_like("normal_like", t, {}, options);
}

}  // namespace kiln
