// sum, prod, mean, amax, amin, max, min, argmax, argmin, var, std, softmax,
// log_softmax: ops that fold a tensor along dims.
#include "kiln/ops/reduction.h"

#include "kiln/kernels/cpu/reduce.h"
#include "kiln/kernels/cpu/softmax.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/infer_util.h"

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

IntList reduced_shape(const IntList& shape, DimMask mask, bool keepdim) {
  IntList out;
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
  KILN_CHECK_INDEX(dim_given || numel_of(x.shape) > 0, args.op.name,
                   ": expected reduction dim to be specified for input.numel() == 0 (shape ",
                   x.shape, "); specify the reduction dim with the 'dim' argument");
  for (int64_t d = 0; d < x.dim(); ++d) {
    KILN_CHECK_INDEX(!is_reduced(mask, int(d)) || x.shape[d] != 0, args.op.name,
                     ": expected reduction dim ", d, " to have non-zero size (shape ", x.shape,
                     ")");
  }
}

// sum, prod: a given dtype converts the input first; otherwise bool and
// integer inputs give int64 (the kernel widens them itself, no cast).
InferResult infer_sum_prod(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  DimMask mask = checked_mask(args, args.attrs.get_ints("dims"));
  IntList shape = reduced_shape(x.shape, mask, args.attrs.get_bool("keepdim"));
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
  IntList shape = reduced_shape(x.shape, mask, args.attrs.get_bool("keepdim"));
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
  IntList shape = reduced_shape(x.shape, mask, args.attrs.get_bool("keepdim"));
  return InferResult{{TensorMeta{x.dtype, shape}}, {}};
}

InferResult infer_max_min(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  DimMask mask = checked_mask(args, {args.attrs.get_int("dim")});
  check_nonempty(args, mask, true);
  IntList shape = reduced_shape(x.shape, mask, args.attrs.get_bool("keepdim"));
  return InferResult{{TensorMeta{x.dtype, shape}, TensorMeta{DType::Int64, shape}}, {}};
}

InferResult infer_argmax_argmin(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  KILN_CHECK_TYPE(x.dtype != DType::Bool, args.op.name, ": does not support bool input (shape ",
                  x.shape, ")");
  const bool dim_given = args.attrs.has("dim");
  DimMask mask = dim_given ? checked_mask(args, {args.attrs.get_int("dim")}) : all_dims(x.dim());
  check_nonempty(args, mask, dim_given);
  IntList shape = reduced_shape(x.shape, mask, args.attrs.get_bool("keepdim"));
  return InferResult{{TensorMeta{DType::Int64, shape}}, {}};
}

InferResult infer_var_std(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  KILN_CHECK_TYPE(is_floating(x.dtype), args.op.name,
                  ": std and var only support floating point dtypes, got ", x.dtype, " (shape ",
                  x.shape, ")");
  DimMask mask = checked_mask(args, args.attrs.get_ints("dims"));
  IntList shape = reduced_shape(x.shape, mask, args.attrs.get_bool("keepdim"));
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

std::vector<AttrSpec> dims_keepdim_dtype() {
  return {{"dims", AttrKind::Ints, IntList{}},
          {"keepdim", AttrKind::Bool, false},
          {"dtype", AttrKind::DType, {}, true}};
}

std::vector<AttrSpec> dims_keepdim() {
  return {{"dims", AttrKind::Ints, IntList{}}, {"keepdim", AttrKind::Bool, false}};
}

void add_reduction(OpRegistry& registry, std::string name, std::vector<AttrSpec> attrs,
                   InferFn infer, KernelFn cpu, std::string onnx, int num_outputs = 1) {
  registry.add(OpDef{.name = std::move(name),
                     .num_outputs = num_outputs,
                     .attrs = std::move(attrs),
                     .infer = infer,
                     .cpu = cpu,
                     .kind = OpKind::Reduction,
                     .onnx = {std::move(onnx)}});
}

}  // namespace

void register_reduction_ops(OpRegistry& registry) {
  using cpu::ReduceKind;
  add_reduction(registry, "sum", dims_keepdim_dtype(), infer_sum_prod,
                reduce_kernel<ReduceKind::Sum>, "ReduceSum");
  add_reduction(registry, "prod", dims_keepdim_dtype(), infer_sum_prod,
                reduce_kernel<ReduceKind::Prod>, "ReduceProd");
  add_reduction(registry, "mean", dims_keepdim_dtype(), infer_mean, reduce_kernel<ReduceKind::Mean>,
                "ReduceMean");
  add_reduction(registry, "amax", dims_keepdim(), infer_amax_amin, reduce_kernel<ReduceKind::Max>,
                "ReduceMax");
  add_reduction(registry, "amin", dims_keepdim(), infer_amax_amin, reduce_kernel<ReduceKind::Min>,
                "ReduceMin");

  // Two outputs (values, indices); ONNX has no single op for both.
  const std::vector<AttrSpec> dim_keepdim = {{"dim", AttrKind::Int, {}},
                                             {"keepdim", AttrKind::Bool, false}};
  add_reduction(registry, "max", dim_keepdim, infer_max_min, max_min_kernel<true>, "", 2);
  add_reduction(registry, "min", dim_keepdim, infer_max_min, max_min_kernel<false>, "", 2);

  // No dim: the index within the flattened tensor.
  const std::vector<AttrSpec> optional_dim_keepdim = {{"dim", AttrKind::Int, {}, true},
                                                      {"keepdim", AttrKind::Bool, false}};
  add_reduction(registry, "argmax", optional_dim_keepdim, infer_argmax_argmin,
                argmax_argmin_kernel<true>, "ArgMax");
  add_reduction(registry, "argmin", optional_dim_keepdim, infer_argmax_argmin,
                argmax_argmin_kernel<false>, "ArgMin");

  const std::vector<AttrSpec> var_attrs = {{"dims", AttrKind::Ints, IntList{}},
                                           {"correction", AttrKind::Int, int64_t(1)},
                                           {"keepdim", AttrKind::Bool, false}};
  add_reduction(registry, "var", var_attrs, infer_var_std, var_std_kernel<false>, "");
  add_reduction(registry, "std", var_attrs, infer_var_std, var_std_kernel<true>, "");

  // Opaque rather than Reduction: the output keeps the input's shape.
  for (bool log : {false, true}) {
    registry.add(OpDef{.name = log ? "log_softmax" : "softmax",
                       .attrs = {{"dim", AttrKind::Int, {}}},
                       .infer = infer_softmax,
                       .cpu = log ? softmax_kernel<true> : softmax_kernel<false>,
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
