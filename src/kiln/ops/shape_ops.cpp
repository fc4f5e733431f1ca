// Ops that rearrange or pick values into a new tensor: reshape (the copying
// half of the reshape API function), cat, stack, index_select, gather,
// embedding, one_hot.
#include "kiln/core/factory.h"
#include "kiln/kernels/cpu/concat.h"
#include "kiln/kernels/cpu/copy.h"
#include "kiln/kernels/cpu/gather.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/registry.h"
#include "kiln/ops/shape.h"

namespace kiln {
namespace {

// A dim attribute in [0, ndim): infer has already checked its range.
int wrapped_dim(const Attrs& attrs, int ndim) {
  int64_t dim = attrs.get_int("dim");
  return int(dim < 0 ? dim + std::max(ndim, 1) : dim);
}

bool is_index_dtype(DType dtype) {
  return dtype == DType::Int64 || dtype == DType::Int32;
}

InferResult infer_reshape_op(const InferArgs& args) {
  const TensorMeta& in = args.inputs[0];
  IntList shape =
      infer_reshape(args.attrs.get_ints("shape"), numel_of(in.shape), "reshape", in.shape);
  return InferResult{{TensorMeta{in.dtype, std::move(shape)}}, {}};
}

// Row-major order is the same in both shapes, so the contiguous output is
// written as if it had the input's shape.
void reshape_kernel(const KernelArgs& args) {
  const cpu::StridedView& in = args.inputs[0];
  cpu::StridedView out = args.outputs[0];
  KILN_ASSERT(out.is_contiguous(), "reshape: output must be contiguous");
  IntList in_shape(in.shape, in.shape + in.ndim);
  IntList strides = contiguous_strides(in_shape);
  out.ndim = in.ndim;
  std::copy(in_shape.begin(), in_shape.end(), out.shape);
  std::copy(strides.begin(), strides.end(), out.strides);
  cpu::copy_convert(out, in);
}

DType promoted_dtype(std::span<const TensorMeta> inputs) {
  DType dtype = inputs[0].dtype;
  for (const TensorMeta& m : inputs)
    dtype = promote_types(dtype, m.dtype);
  return dtype;
}

// PyTorch lets a 1-D empty tensor join a cat of any shape (legacy behaviour
// that old code relies on).
bool skipped_by_cat(const TensorMeta& m) {
  return m.shape == IntList{0};
}

InferResult infer_cat(const InferArgs& args) {
  std::span<const TensorMeta> inputs = args.inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK(inputs[i].dim() > 0, "cat: zero-dimensional tensor (at position ", i,
               ") cannot be concatenated");
  }
  auto ref_it = std::find_if(inputs.begin(), inputs.end(),
                             [](const TensorMeta& m) { return !skipped_by_cat(m); });
  const TensorMeta& ref = ref_it == inputs.end() ? inputs[0] : *ref_it;
  int64_t d = wrap_dim(args.attrs.get_int("dim"), ref.dim(), "cat", ref.shape);
  IntList shape = ref.shape;
  shape[size_t(d)] = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const IntList& s = inputs[i].shape;
    if (skipped_by_cat(inputs[i]) && &inputs[i] != &ref) continue;
    KILN_CHECK(s.size() == ref.shape.size(),
               "cat: Tensors must have same number of dimensions: got ", ref.dim(), " and ",
               inputs[i].dim(), " (tensor number ", i, " has shape ", s, ", expected a shape like ",
               ref.shape, ")");
    for (size_t k = 0; k < s.size(); ++k) {
      KILN_CHECK(int64_t(k) == d || s[k] == ref.shape[k],
                 "cat: Sizes of tensors must match except in dimension ", d, ". Expected size ",
                 ref.shape[k], " but got size ", s[k], " for tensor number ", i,
                 " in the list (shapes ", ref.shape, " and ", s, ", dim ", k, ")");
    }
    shape[size_t(d)] += s[size_t(d)];
  }
  DType dtype = promoted_dtype(inputs);
  return InferResult{{TensorMeta{dtype, std::move(shape)}},
                     std::vector<DType>(inputs.size(), dtype)};
}

void cat_kernel(const KernelArgs& args) {
  const cpu::StridedView& out = args.outputs[0];
  cpu::concat(out, args.inputs, wrapped_dim(args.attrs, out.ndim));
}

InferResult infer_stack(const InferArgs& args) {
  std::span<const TensorMeta> inputs = args.inputs;
  const IntList& first = inputs[0].shape;
  for (size_t i = 1; i < inputs.size(); ++i) {
    KILN_CHECK(inputs[i].shape == first, "stack expects each tensor to be equal size, but got ",
               first, " at entry 0 and ", inputs[i].shape, " at entry ", i);
  }
  int64_t d = wrap_dim(args.attrs.get_int("dim"), inputs[0].dim() + 1, "stack", first);
  IntList shape = first;
  shape.insert(shape.begin() + d, int64_t(inputs.size()));
  DType dtype = promoted_dtype(inputs);
  return InferResult{{TensorMeta{dtype, std::move(shape)}},
                     std::vector<DType>(inputs.size(), dtype)};
}

void stack_kernel(const KernelArgs& args) {
  const cpu::StridedView& out = args.outputs[0];
  cpu::stack(out, args.inputs, wrapped_dim(args.attrs, out.ndim));
}

void check_index_dtype(const InferArgs& args, const TensorMeta& index) {
  KILN_CHECK_TYPE(is_index_dtype(index.dtype), args.op.name,
                  ": expected an int64 or int32 index tensor, got ", index.dtype, " (shape ",
                  index.shape, ")");
}

InferResult infer_index_select(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  const TensorMeta& index = args.inputs[1];
  check_index_dtype(args, index);
  KILN_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector, got shape ",
                   index.shape);
  int64_t d = wrap_dim(args.attrs.get_int("dim"), x.dim(), "index_select", x.shape);
  int64_t count = numel_of(index.shape);
  if (x.dim() == 0) {
    KILN_CHECK_INDEX(count == 1, "index_select(): Index to scalar can have only 1 value, got ",
                     count, " value(s)");
    return InferResult{{TensorMeta{x.dtype, {}}}, {}};
  }
  IntList shape = x.shape;
  shape[size_t(d)] = count;
  return InferResult{{TensorMeta{x.dtype, std::move(shape)}}, {}};
}

void index_select_kernel(const KernelArgs& args) {
  const cpu::StridedView& x = args.inputs[0];
  cpu::index_select(args.outputs[0], x, args.inputs[1], wrapped_dim(args.attrs, x.ndim));
}

InferResult infer_gather(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  const TensorMeta& index = args.inputs[1];
  check_index_dtype(args, index);
  int64_t d = wrap_dim(args.attrs.get_int("dim"), x.dim(), "gather", x.shape);
  // A 0-d tensor counts as 1-D here, as in PyTorch.
  KILN_CHECK(std::max<int64_t>(index.dim(), 1) == std::max<int64_t>(x.dim(), 1),
             "gather: Index tensor must have the same number of dimensions as input tensor (index "
             "shape ",
             index.shape, ", input shape ", x.shape, ")");
  for (int64_t k = 0; k < index.dim() && x.dim() > 0; ++k) {
    KILN_CHECK(k == d || index.shape[size_t(k)] <= x.shape[size_t(k)],
               "gather: Size does not match at dimension ", k, " expected index ", index.shape,
               " to be smaller than self ", x.shape, " apart from dimension ", d);
  }
  return InferResult{{TensorMeta{x.dtype, index.shape}}, {}};
}

void gather_kernel(const KernelArgs& args) {
  const cpu::StridedView& x = args.inputs[0];
  cpu::gather(args.outputs[0], x, args.inputs[1], wrapped_dim(args.attrs, x.ndim));
}

InferResult infer_embedding(const InferArgs& args) {
  const TensorMeta& weight = args.inputs[0];
  const TensorMeta& indices = args.inputs[1];
  KILN_CHECK(weight.dim() == 2, "embedding: 'weight' must be 2-D, got shape ", weight.shape);
  check_index_dtype(args, indices);
  int64_t rows = weight.shape[0];
  if (args.attrs.has("padding_idx")) {
    int64_t padding_idx = args.attrs.get_int("padding_idx");
    KILN_CHECK(padding_idx >= -rows && padding_idx < rows, "embedding: Padding_idx ", padding_idx,
               " must be within num_embeddings (", rows, ", weight shape ", weight.shape, ")");
  }
  IntList shape = indices.shape;
  shape.push_back(weight.shape[1]);
  return InferResult{{TensorMeta{weight.dtype, std::move(shape)}}, {}};
}

void embedding_kernel(const KernelArgs& args) {
  cpu::embedding(args.outputs[0], args.inputs[0], args.inputs[1]);
}

InferResult infer_one_hot(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  KILN_CHECK(x.dtype == DType::Int64,
             "one_hot is only applicable to index tensor of type LongTensor, got ", x.dtype);
  int64_t num_classes = args.attrs.get_int("num_classes");
  KILN_CHECK(num_classes > 0, "one_hot: num_classes must be positive, got ", num_classes);
  IntList shape = x.shape;
  shape.push_back(num_classes);
  return InferResult{{TensorMeta{DType::Int64, std::move(shape)}}, {}};
}

void one_hot_kernel(const KernelArgs& args) {
  cpu::one_hot(args.outputs[0], args.inputs[0], args.attrs.get_int("num_classes"));
}

}  // namespace

void register_shape_ops(OpRegistry& registry) {
  const AttrValue none;
  // Always a copy; the reshape API function uses the `view` op instead when
  // the input's strides allow it.
  registry.add(OpDef{.name = "reshape",
                     .attrs = {{"shape", AttrKind::Ints, none}},
                     .infer = infer_reshape_op,
                     .cpu = reshape_kernel,
                     .onnx = {"Reshape"}});
  registry.add(OpDef{.name = "cat",
                     .max_inputs = -1,
                     .attrs = {{"dim", AttrKind::Int, int64_t(0)}},
                     .infer = infer_cat,
                     .cpu = cat_kernel,
                     .onnx = {"Concat"}});
  // ONNX has no Stack: the exporter writes Unsqueeze + Concat.
  registry.add(OpDef{.name = "stack",
                     .max_inputs = -1,
                     .attrs = {{"dim", AttrKind::Int, int64_t(0)}},
                     .infer = infer_stack,
                     .cpu = stack_kernel,
                     .onnx = {""}});
  registry.add(OpDef{.name = "index_select",
                     .min_inputs = 2,
                     .max_inputs = 2,
                     .attrs = {{"dim", AttrKind::Int, none}},
                     .infer = infer_index_select,
                     .cpu = index_select_kernel,
                     .onnx = {"Gather"}});
  registry.add(OpDef{.name = "gather",
                     .min_inputs = 2,
                     .max_inputs = 2,
                     .attrs = {{"dim", AttrKind::Int, none}},
                     .infer = infer_gather,
                     .cpu = gather_kernel,
                     .onnx = {"GatherElements"}});
  // Inputs: weight, indices. padding_idx only matters to the backward rule.
  registry.add(OpDef{.name = "embedding",
                     .min_inputs = 2,
                     .max_inputs = 2,
                     .attrs = {{"padding_idx", AttrKind::Int, none, true}},
                     .infer = infer_embedding,
                     .cpu = embedding_kernel,
                     .onnx = {"Gather"}});
  registry.add(OpDef{.name = "one_hot",
                     .attrs = {{"num_classes", AttrKind::Int, none}},
                     .infer = infer_one_hot,
                     .cpu = one_hot_kernel,
                     .onnx = {"OneHot"}});
}

}  // namespace kiln

namespace kiln {

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  KILN_CHECK_VALUE(!tensors.empty(), "cat(): expected a non-empty list of Tensors");
  static const OpDef& cat_op = op("cat");
  return dispatch1(cat_op, tensors, {{"dim", dim}});
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  KILN_CHECK_VALUE(!tensors.empty(), "stack expects a non-empty TensorList");
  static const OpDef& stack_op = op("stack");
  return dispatch1(stack_op, tensors, {{"dim", dim}});
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  static const OpDef& index_select_op = op("index_select");
  return dispatch1(index_select_op, {x, index}, {{"dim", dim}});
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  static const OpDef& gather_op = op("gather");
  return dispatch1(gather_op, {x, index}, {{"dim", dim}});
}

Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx) {
  static const OpDef& embedding_op = op("embedding");
  AttrValue padding = padding_idx ? AttrValue(*padding_idx) : AttrValue();
  return dispatch1(embedding_op, {weight, indices}, {{"padding_idx", padding}});
}

// num_classes = -1 reads the values (as PyTorch does), so a trace sees the
// class count as a constant.
Tensor one_hot(const Tensor& x, int64_t num_classes) {
  static const OpDef& one_hot_op = op("one_hot");
  if (num_classes == -1) {
    KILN_CHECK(x.dtype() == DType::Int64,
               "one_hot is only applicable to index tensor of type LongTensor, got ", x.dtype());
    KILN_CHECK(x.numel() > 0, "one_hot: Can not infer total number of classes from empty tensor.");
    int64_t largest = cpu::max_int64(view_of(x));
    KILN_CHECK(largest >= 0, "one_hot: Class values must be non-negative, got ", largest);
    num_classes = largest + 1;
  }
  return dispatch1(one_hot_op, {x}, {{"num_classes", num_classes}});
}

}  // namespace kiln
