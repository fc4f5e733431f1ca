// sum, prod, mean, amax, amin, max, min, argmax, argmin, var, std, softmax,
// log_softmax: ops that fold a tensor along dims.
#include "kiln/ops/reduction.h"

#include <bit>
#include <cmath>
#include <limits>

#include "kiln/core/factory.h"
#include "kiln/kernels/cpu/reduce.h"
#include "kiln/kernels/cpu/softmax.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/infer_util.h"
#include "kiln/ops/view.h"

namespace kiln {
namespace {

using cpu::DimMask;
using cpu::is_reduced;

DimMask all_dims(int64_t ndim) {
  return ndim == 0 ? 0 : ~DimMask(0) >> (64 - ndim);
}

// The kernel side of the dims attribute; infer has already checked it.
DimMask mask_of(const IntList& dims, int64_t ndim) {
  if (dims.empty()) return all_dims(ndim);
  DimMask mask = 0;
  for (int64_t d : dims)
    mask |= DimMask(1) << (d < 0 ? d + std::max<int64_t>(ndim, 1) : d);
  return mask;
}

// Checks `dims` (empty: every dim) the way PyTorch does: in range after
// wrapping negatives, and no dim twice.
DimMask checked_mask(const InferArgs& args, const IntList& dims) {
  const TensorMeta& x = args.inputs[0];
  KILN_CHECK(x.dim() <= 64, args.op.name, ": tensors of more than 64 dims are not supported (",
             x.dim(), " dims)");
  DimMask mask = 0;
  for (int64_t dim : dims) {
    int64_t d = wrap_dim(dim, x.dim(), args.op.name, x.shape);
    KILN_CHECK(!is_reduced(mask, int(d)), args.op.name, ": dim ", d,
               " appears multiple times in the list of dims (shape ", x.shape, ")");
    mask |= DimMask(1) << d;
  }
  return dims.empty() ? all_dims(x.dim()) : mask;
}

DimList reduced_shape(const DimList& shape, DimMask mask, bool keepdim) {
  DimList out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!is_reduced(mask, int(d))) {
      out.push_back(shape[d]);
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return out;
}

// max, amax and argmax have no identity to return for zero elements.
void check_nonempty(const InferArgs& args, DimMask mask, bool dim_given) {
  const TensorMeta& x = args.inputs[0];
  // Sizes not known to be zero pass; a call with an empty input then fails
  // in the kernel's own check.
  KILN_CHECK_INDEX(dim_given || !definitely_less(numel_of(x.shape), 1), args.op.name,
                   ": expected reduction dim to be specified for input.numel() == 0 (shape ",
                   x.shape, "); specify the reduction dim with the 'dim' argument");
  for (int64_t d = 0; d < x.dim(); ++d) {
    KILN_CHECK_INDEX(!is_reduced(mask, int(d)) || !definitely_less(x.shape[d], 1), args.op.name,
                     ": expected reduction dim ", d, " to have non-zero size (shape ", x.shape,
                     ")");
  }
}

// sum, prod: a given dtype converts the input first; otherwise bool and
// integer inputs give int64 (the kernel widens them itself, no cast).
InferResult infer_sum_prod(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  DimMask mask = checked_mask(args, args.attrs.get_ints("dims"));
  DimList shape = reduced_shape(x.shape, mask, args.attrs.get_bool("keepdim"));
  if (args.attrs.has("dtype")) {
    DType dtype = args.attrs.get_dtype("dtype");
    return InferResult{{TensorMeta{dtype, shape}}, {dtype}};
  }
  DType out = is_floating(x.dtype) ? x.dtype : DType::Int64;
  return InferResult{{TensorMeta{out, shape}}, {}};
}

InferResult infer_mean(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  DimMask mask = checked_mask(args, args.attrs.get_ints("dims"));
  DimList shape = reduced_shape(x.shape, mask, args.attrs.get_bool("keepdim"));
  if (args.attrs.has("dtype")) {
    DType dtype = args.attrs.get_dtype("dtype");
    KILN_CHECK_TYPE(is_floating(dtype), args.op.name,
                    ": the dtype argument must be a floating point type, got ", dtype);
    return InferResult{{TensorMeta{dtype, shape}}, {dtype}};
  }
  KILN_CHECK_TYPE(is_floating(x.dtype), args.op.name,
                  ": could not infer output dtype. Input dtype must be either a floating point "
                  "or complex dtype. Got: ",
                  x.dtype, " (shape ", x.shape, ")");
  return InferResult{{TensorMeta{x.dtype, shape}}, {}};
}

InferResult infer_amax_amin(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  const IntList& dims = args.attrs.get_ints("dims");
  DimMask mask = checked_mask(args, dims);
  check_nonempty(args, mask, !dims.empty());
  DimList shape = reduced_shape(x.shape, mask, args.attrs.get_bool("keepdim"));
  return InferResult{{TensorMeta{x.dtype, shape}}, {}};
}

InferResult infer_max_min(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  DimMask mask = checked_mask(args, {args.attrs.get_int("dim")});
  check_nonempty(args, mask, true);
  DimList shape = reduced_shape(x.shape, mask, args.attrs.get_bool("keepdim"));
  return InferResult{{TensorMeta{x.dtype, shape}, TensorMeta{DType::Int64, shape}}, {}};
}

InferResult infer_argmax_argmin(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  KILN_CHECK_TYPE(x.dtype != DType::Bool, args.op.name, ": does not support bool input (shape ",
                  x.shape, ")");
  const bool dim_given = args.attrs.has("dim");
  DimMask mask = dim_given ? checked_mask(args, {args.attrs.get_int("dim")}) : all_dims(x.dim());
  check_nonempty(args, mask, dim_given);
  DimList shape = reduced_shape(x.shape, mask, args.attrs.get_bool("keepdim"));
  return InferResult{{TensorMeta{DType::Int64, shape}}, {}};
}

InferResult infer_var_std(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  KILN_CHECK_TYPE(is_floating(x.dtype), args.op.name,
                  ": std and var only support floating point dtypes, got ", x.dtype, " (shape ",
                  x.shape, ")");
  DimMask mask = checked_mask(args, args.attrs.get_ints("dims"));
  DimList shape = reduced_shape(x.shape, mask, args.attrs.get_bool("keepdim"));
  return InferResult{{TensorMeta{x.dtype, shape}}, {}};
}

InferResult infer_softmax(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  check_floating(args, 0);
  wrap_dim(args.attrs.get_int("dim"), x.dim(), args.op.name, x.shape);
  return infer_same(args);
}

template <cpu::ReduceKind Kind>
void reduce_kernel(const KernelArgs& args) {
  const cpu::StridedView& x = args.inputs[0];
  cpu::reduce(args.outputs[0], x, mask_of(args.attrs.get_ints("dims"), x.ndim), Kind);
}

template <bool IsMax>
void max_min_kernel(const KernelArgs& args) {
  const cpu::StridedView& x = args.inputs[0];
  DimMask mask = mask_of({args.attrs.get_int("dim")}, x.ndim);
  cpu::reduce_with_index(args.outputs[0], args.outputs[1], x, mask, IsMax);
}

template <bool IsMax>
void argmax_argmin_kernel(const KernelArgs& args) {
  const cpu::StridedView& x = args.inputs[0];
  DimMask mask =
      args.attrs.has("dim") ? mask_of({args.attrs.get_int("dim")}, x.ndim) : all_dims(x.ndim);
  cpu::StridedView no_values;  // null data: only the indices are written
  cpu::reduce_with_index(no_values, args.outputs[0], x, mask, IsMax);
}

template <bool TakeSqrt>
void var_std_kernel(const KernelArgs& args) {
  const cpu::StridedView& x = args.inputs[0];
  cpu::variance(args.outputs[0], x, mask_of(args.attrs.get_ints("dims"), x.ndim),
                args.attrs.get_int("correction"), TakeSqrt);
}

template <bool Log>
void softmax_kernel(const KernelArgs& args) {
  const cpu::StridedView& x = args.inputs[0];
  int64_t dim = args.attrs.get_int("dim");
  if (dim < 0) dim += std::max(x.ndim, 1);
  cpu::softmax(args.outputs[0], x, int(dim), Log);
}

// ---- backward rules ----
// A reduction's gradient is its output gradient spread back over the reduced
// dims: `keepdim_view` first puts size-1 dims back where keepdim=false
// removed them, so that it broadcasts against the input.

DimMask input_mask(const GradContext& ctx, const IntList& dims) {
  int64_t ndim = ctx.input_meta(0).dim();
  return ndim == 0 ? 0 : mask_of(dims, ndim);
}

Tensor keepdim_view(const GradContext& ctx, const Tensor& t, DimMask mask) {
  if (ctx.attrs().get_bool("keepdim")) return t;
  return reshape(t,
                 ctx.input_shape(0).size() == 0
                     ? IntList{}
                     : to_static(reduced_shape(ctx.input_meta(0).shape, mask, true), "backward"));
}

// How many input elements fold into each output element.
int64_t reduced_count(const GradContext& ctx, DimMask mask) {
  const IntList& shape = ctx.input_shape(0);
  int64_t n = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (is_reduced(mask, int(d))) n *= shape[d];
  }
  return n;
}

// d sum = 1 for every element folded in.
std::vector<Tensor> sum_grad(const GradContext& ctx) {
  if (!ctx.needs_input_grad(0)) return {Tensor()};
  DimMask mask = input_mask(ctx, ctx.attrs().get_ints("dims"));
  return {expand(keepdim_view(ctx, ctx.grad_output(0), mask), ctx.input_shape(0))};
}

std::vector<Tensor> mean_grad(const GradContext& ctx) {  // d mean = 1 / n
  if (!ctx.needs_input_grad(0)) return {Tensor()};
  DimMask mask = input_mask(ctx, ctx.attrs().get_ints("dims"));
  Tensor g = keepdim_view(ctx, ctx.grad_output(0), mask) / double(reduced_count(ctx, mask));
  return {expand(g, ctx.input_shape(0))};
}

// d prod / d x_i = prod_{j != i} x_j: y / x_i without zeros; with one zero,
// the product of the others at the zero and 0 elsewhere; with two or more,
// 0 everywhere. Built from where/prod so it stays differentiable.
std::vector<Tensor> prod_grad(const GradContext& ctx) {
  if (!ctx.needs_input_grad(0)) return {Tensor()};
  if (ctx.input_meta(0).dim() == 0) return {ctx.grad_output(0)};
  const IntList& dims = ctx.attrs().get_ints("dims");
  DimMask mask = input_mask(ctx, dims);
  Tensor x = ctx.input(0);
  Tensor g = keepdim_view(ctx, ctx.grad_output(0), mask);
  Tensor y = keepdim_view(ctx, ctx.output(0), mask);
  Tensor is_zero = x == 0.0;
  Tensor zeros_in_group = sum(is_zero, dims, /*keepdim=*/true);
  Tensor safe_x = where(is_zero, 1.0, x);
  Tensor others_at_zero = where(is_zero * (zeros_in_group == int64_t(1)),
                                g * prod(safe_x, dims, /*keepdim=*/true), 0.0);
  return {where(zeros_in_group == int64_t(0), g * (y / safe_x), others_at_zero)};
}

// amax/amin: the gradient is split equally among the elements equal to the
// result, (g / count) * [x == y] as PyTorch (so a NaN result gives NaN).
std::vector<Tensor> amax_amin_grad(const GradContext& ctx) {
  if (!ctx.needs_input_grad(0)) return {Tensor()};
  const IntList& dims = ctx.attrs().get_ints("dims");
  DimMask mask = input_mask(ctx, dims);
  Tensor picked = ctx.input(0) == keepdim_view(ctx, ctx.output(0), mask);
  Tensor count = sum(picked, dims, /*keepdim=*/true);
  return {(keepdim_view(ctx, ctx.grad_output(0), mask) / count) * picked};
}

// max/min along a dim: the values' gradient goes to the element the index
// output names (indices carry none): where(arange(n) == index, g, 0).
std::vector<Tensor> max_min_grad(const GradContext& ctx) {
  if (!ctx.needs_input_grad(0)) return {Tensor()};
  const IntList& shape = ctx.input_shape(0);
  if (shape.empty()) return {ctx.grad_output(0)};
  DimMask mask = input_mask(ctx, {ctx.attrs().get_int("dim")});
  int64_t dim = std::countr_zero(mask);
  IntList positions_shape(shape.size(), 1);
  positions_shape[size_t(dim)] = shape[size_t(dim)];
  Tensor positions = reshape(arange(shape[size_t(dim)]), positions_shape);
  Tensor index = keepdim_view(ctx, ctx.output(1), mask);
  return {where(positions == index, keepdim_view(ctx, ctx.grad_output(0), mask), 0.0)};
}

// d var = 2 (x - mean) / (n - correction), from g in keepdim form. With no
// degrees of freedom left over all dims, PyTorch gives NaN at the mean and
// infinity elsewhere.
Tensor var_backward(const GradContext& ctx, const Tensor& g, DimMask mask) {
  const IntList& dims = ctx.attrs().get_ints("dims");
  Tensor x = ctx.input(0);
  Tensor centered = x - mean(x, dims, /*keepdim=*/true);
  int64_t dof = reduced_count(ctx, mask) - ctx.attrs().get_int("correction");
  if (dof <= 0 && dims.empty()) {
    return g * where(centered == 0.0, std::numeric_limits<double>::quiet_NaN(),
                     full_like(x, std::numeric_limits<double>::infinity()));
  }
  return (2.0 / double(dof)) * g * centered;
}

std::vector<Tensor> var_grad(const GradContext& ctx) {
  if (!ctx.needs_input_grad(0)) return {Tensor()};
  DimMask mask = input_mask(ctx, ctx.attrs().get_ints("dims"));
  return {var_backward(ctx, keepdim_view(ctx, ctx.grad_output(0), mask), mask)};
}

// d std = d var / (2 std), and 0 where std == 0.
std::vector<Tensor> std_grad(const GradContext& ctx) {
  if (!ctx.needs_input_grad(0)) return {Tensor()};
  DimMask mask = input_mask(ctx, ctx.attrs().get_ints("dims"));
  Tensor y = ctx.output(0);
  Tensor g_var = where(y == 0.0, 0.0, ctx.grad_output(0) / (2.0 * y));
  return {var_backward(ctx, keepdim_view(ctx, g_var, mask), mask)};
}

// sum of t along the op's dim, kept (a 0-d tensor is its own sum).
Tensor sum_along_dim(const GradContext& ctx, const Tensor& t) {
  if (t.dim() == 0) return t;
  return sum(t, {ctx.attrs().get_int("dim")}, /*keepdim=*/true);
}

// d softmax: y (g - sum(g y))
std::vector<Tensor> softmax_grad(const GradContext& ctx) {
  if (!ctx.needs_input_grad(0)) return {Tensor()};
  const Tensor& g = ctx.grad_output(0);
  Tensor y = ctx.output(0);
  return {y * (g - sum_along_dim(ctx, g * y))};
}

// d log_softmax: g - exp(y) sum(g)
std::vector<Tensor> log_softmax_grad(const GradContext& ctx) {
  if (!ctx.needs_input_grad(0)) return {Tensor()};
  const Tensor& g = ctx.grad_output(0);
  return {g - exp(ctx.output(0)) * sum_along_dim(ctx, g)};
}

std::vector<AttrSpec> dims_keepdim_dtype() {
  return {{"dims", AttrKind::Ints, IntList{}},
          {"keepdim", AttrKind::Bool, false},
          {"dtype", AttrKind::DType, {}, true}};
}

std::vector<AttrSpec> dims_keepdim() {
  return {{"dims", AttrKind::Ints, IntList{}}, {"keepdim", AttrKind::Bool, false}};
}

void add_reduction(OpRegistry& registry, std::string name, std::vector<AttrSpec> attrs,
                   InferFn infer, KernelFn cpu, GradFn grad, std::string onnx,
                   int num_outputs = 1) {
  registry.add(OpDef{.name = std::move(name),
                     .num_outputs = num_outputs,
                     .attrs = std::move(attrs),
                     .infer = infer,
                     .cpu = cpu,
                     .grad = grad,
                     .kind = OpKind::Reduction,
                     .onnx = {std::move(onnx)}});
}

}  // namespace

void register_reduction_ops(OpRegistry& registry) {
  using cpu::ReduceKind;
  add_reduction(registry, "sum", dims_keepdim_dtype(), infer_sum_prod,
                reduce_kernel<ReduceKind::Sum>, sum_grad, "ReduceSum");
  add_reduction(registry, "prod", dims_keepdim_dtype(), infer_sum_prod,
                reduce_kernel<ReduceKind::Prod>, prod_grad, "ReduceProd");
  add_reduction(registry, "mean", dims_keepdim_dtype(), infer_mean, reduce_kernel<ReduceKind::Mean>,
                mean_grad, "ReduceMean");
  add_reduction(registry, "amax", dims_keepdim(), infer_amax_amin, reduce_kernel<ReduceKind::Max>,
                amax_amin_grad, "ReduceMax");
  add_reduction(registry, "amin", dims_keepdim(), infer_amax_amin, reduce_kernel<ReduceKind::Min>,
                amax_amin_grad, "ReduceMin");

  // Two outputs (values, indices); ONNX has no single op for both.
  const std::vector<AttrSpec> dim_keepdim = {{"dim", AttrKind::Int, {}},
                                             {"keepdim", AttrKind::Bool, false}};
  add_reduction(registry, "max", dim_keepdim, infer_max_min, max_min_kernel<true>, max_min_grad, "",
                2);
  add_reduction(registry, "min", dim_keepdim, infer_max_min, max_min_kernel<false>, max_min_grad,
                "", 2);

  // No dim: the index within the flattened tensor. Integer outputs: no rule.
  const std::vector<AttrSpec> optional_dim_keepdim = {{"dim", AttrKind::Int, {}, true},
                                                      {"keepdim", AttrKind::Bool, false}};
  add_reduction(registry, "argmax", optional_dim_keepdim, infer_argmax_argmin,
                argmax_argmin_kernel<true>, nullptr, "ArgMax");
  add_reduction(registry, "argmin", optional_dim_keepdim, infer_argmax_argmin,
                argmax_argmin_kernel<false>, nullptr, "ArgMin");

  const std::vector<AttrSpec> var_attrs = {{"dims", AttrKind::Ints, IntList{}},
                                           {"correction", AttrKind::Int, int64_t(1)},
                                           {"keepdim", AttrKind::Bool, false}};
  add_reduction(registry, "var", var_attrs, infer_var_std, var_std_kernel<false>, var_grad, "");
  add_reduction(registry, "std", var_attrs, infer_var_std, var_std_kernel<true>, std_grad, "");

  // Opaque rather than Reduction: the output keeps the input's shape.
  for (bool log : {false, true}) {
    registry.add(OpDef{.name = log ? "log_softmax" : "softmax",
                       .attrs = {{"dim", AttrKind::Int, {}}},
                       .infer = infer_softmax,
                       .cpu = log ? softmax_kernel<true> : softmax_kernel<false>,
                       .grad = log ? log_softmax_grad : softmax_grad,
                       .kind = OpKind::Opaque,
                       .onnx = {log ? "LogSoftmax" : "Softmax"}});
  }
}

namespace {

Attrs reduce_attrs(const IntList& dims, bool keepdim, std::optional<DType> dtype) {
  Attrs attrs{{"dims", dims}, {"keepdim", keepdim}};
  if (dtype) attrs.set("dtype", *dtype);
  return attrs;
}

Attrs dim_attrs(std::optional<int64_t> dim, bool keepdim) {
  Attrs attrs{{"keepdim", keepdim}};
  if (dim) attrs.set("dim", *dim);
  return attrs;
}

std::tuple<Tensor, Tensor> values_and_indices(const OpDef& def, const Tensor& x, int64_t dim,
                                              bool keepdim) {
  std::vector<Tensor> out = dispatch(def, {x}, {{"dim", dim}, {"keepdim", keepdim}});
  return {std::move(out[0]), std::move(out[1])};
}

}  // namespace

Tensor sum(const Tensor& x, IntList dims, bool keepdim, std::optional<DType> dtype) {
  static const OpDef& def = op("sum");
  return dispatch1(def, {x}, reduce_attrs(dims, keepdim, dtype));
}

Tensor prod(const Tensor& x, IntList dims, bool keepdim, std::optional<DType> dtype) {
  static const OpDef& def = op("prod");
  return dispatch1(def, {x}, reduce_attrs(dims, keepdim, dtype));
}

Tensor mean(const Tensor& x, IntList dims, bool keepdim, std::optional<DType> dtype) {
  static const OpDef& def = op("mean");
  return dispatch1(def, {x}, reduce_attrs(dims, keepdim, dtype));
}

Tensor amax(const Tensor& x, IntList dims, bool keepdim) {
  static const OpDef& def = op("amax");
  return dispatch1(def, {x}, reduce_attrs(dims, keepdim, std::nullopt));
}

Tensor amin(const Tensor& x, IntList dims, bool keepdim) {
  static const OpDef& def = op("amin");
  return dispatch1(def, {x}, reduce_attrs(dims, keepdim, std::nullopt));
}

std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  static const OpDef& def = op("max");
  return values_and_indices(def, x, dim, keepdim);
}

std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  static const OpDef& def = op("min");
  return values_and_indices(def, x, dim, keepdim);
}

Tensor max(const Tensor& x) {
  return amax(x);
}
Tensor min(const Tensor& x) {
  return amin(x);
}

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  static const OpDef& def = op("argmax");
  return dispatch1(def, {x}, dim_attrs(dim, keepdim));
}

Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  static const OpDef& def = op("argmin");
  return dispatch1(def, {x}, dim_attrs(dim, keepdim));
}

Tensor var(const Tensor& x, IntList dims, int64_t correction, bool keepdim) {
  static const OpDef& def = op("var");
  return dispatch1(def, {x}, {{"dims", dims}, {"correction", correction}, {"keepdim", keepdim}});
}

Tensor std(const Tensor& x, IntList dims, int64_t correction, bool keepdim) {
  static const OpDef& def = op("std");
  return dispatch1(def, {x}, {{"dims", dims}, {"correction", correction}, {"keepdim", keepdim}});
}

Tensor softmax(const Tensor& x, int64_t dim) {
  static const OpDef& def = op("softmax");
  return dispatch1(def, {x}, {{"dim", dim}});
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  static const OpDef& def = op("log_softmax");
  return dispatch1(def, {x}, {{"dim", dim}});
}

}  // namespace kiln
