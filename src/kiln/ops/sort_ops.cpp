// sort, argsort and topk: ops that order the values along one dim.
#include "kiln/ops/sort.h"

#include "kiln/core/factory.h"
#include "kiln/kernels/cpu/sort.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/registry.h"
#include "kiln/ops/shape.h"

namespace kiln {
namespace {

// The dim attribute in [0, ndim) (0 for a 0-d tensor); infer has checked it.
int wrapped_dim(const Attrs& attrs, int ndim) {
  const int64_t dim = attrs.get_int("dim");
  return int(dim < 0 ? dim + std::max(ndim, 1) : dim);
}

InferResult infer_sort(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  wrap_dim(args.attrs.get_int("dim"), x.dim(), args.op.name, x.shape);
  return InferResult{{TensorMeta{x.dtype, x.shape}, TensorMeta{DType::Int64, x.shape}}, {}};
}

InferResult infer_argsort(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  wrap_dim(args.attrs.get_int("dim"), x.dim(), args.op.name, x.shape);
  return InferResult{{TensorMeta{DType::Int64, x.shape}}, {}};
}

// k may be anything from 0 to the size along dim; a 0-d tensor is one
// element, which it returns whatever k (as PyTorch).
InferResult infer_topk(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  KILN_CHECK_TYPE(x.dtype != DType::Bool, "topk does not support bool dtypes on CPU (shape ",
                  x.shape, ")");
  const int64_t d = wrap_dim(args.attrs.get_int("dim"), x.dim(), "topk", x.shape);
  const int64_t k = args.attrs.get_int("k");
  const Dim size = x.dim() == 0 ? Dim(1) : x.shape[size_t(d)];
  // A symbolic size passes unless no value of it could hold k; the kernel
  // checks each call's own.
  KILN_CHECK_INDEX(k >= 0 && !definitely_less(size, k),
                   "topk: selected index k out of range (k = ", k, ", dim ", d, " has size ", size,
                   ", shape ", x.shape, ")");
  DimList shape = x.shape;
  if (x.dim() > 0) shape[size_t(d)] = k;
  return InferResult{{TensorMeta{x.dtype, shape}, TensorMeta{DType::Int64, shape}}, {}};
}

void sort_kernel(const KernelArgs& args) {
  const cpu::StridedView& x = args.inputs[0];
  cpu::sort(args.outputs[0], args.outputs[1], x, wrapped_dim(args.attrs, x.ndim),
            args.attrs.get_bool("descending"));
}

void argsort_kernel(const KernelArgs& args) {
  const cpu::StridedView& x = args.inputs[0];
  const cpu::StridedView no_values;  // null data: only the indices are written
  cpu::sort(no_values, args.outputs[0], x, wrapped_dim(args.attrs, x.ndim),
            args.attrs.get_bool("descending"));
}

void topk_kernel(const KernelArgs& args) {
  const cpu::StridedView& x = args.inputs[0];
  cpu::topk(args.outputs[0], args.outputs[1], x, wrapped_dim(args.attrs, x.ndim),
            args.attrs.get_bool("largest"));
}

// ---- backward rules ----

// values = x gathered at indices along dim: each value's gradient goes back
// to the position it came from (scatter_add, the backward of gather; the
// positions are distinct, so nothing adds up).
std::vector<Tensor> picked_values_grad(const GradContext& ctx) {
  if (!ctx.needs_input_grad(0)) return {Tensor()};
  const Tensor& g = ctx.grad_output(0);
  const IntList& shape = ctx.input_shape(0);
  if (shape.empty()) return {g};  // a 0-d input is its own sort and topk
  const int dim = wrapped_dim(ctx.attrs(), int(shape.size()));
  return {scatter_add(zeros(shape, ctx.input_meta(0).dtype), dim, ctx.output(1), g)};
}

std::vector<AttrSpec> sort_attrs() {
  return {{"dim", AttrKind::Int, int64_t(-1)},
          {"descending", AttrKind::Bool, false},
          {"stable", AttrKind::Bool, false}};
}

}  // namespace

void register_sort_ops(OpRegistry& registry) {
  const AttrValue none;
  registry.add(OpDef{.name = "sort",
                     .num_outputs = 2,
                     .attrs = sort_attrs(),
                     .infer = infer_sort,
                     .cpu = sort_kernel,
                     .grad = picked_values_grad,
                     .onnx = {""}});
  // Integer output: no gradient.
  registry.add(OpDef{.name = "argsort",
                     .attrs = sort_attrs(),
                     .infer = infer_argsort,
                     .cpu = argsort_kernel,
                     .onnx = {""}});
  registry.add(OpDef{.name = "topk",
                     .num_outputs = 2,
                     .attrs = {{"k", AttrKind::Int, none},
                               {"dim", AttrKind::Int, int64_t(-1)},
                               {"largest", AttrKind::Bool, true},
                               {"sorted", AttrKind::Bool, true}},
                     .infer = infer_topk,
                     .cpu = topk_kernel,
                     .grad = picked_values_grad,
                     .onnx = {"TopK"}});
}

std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  static const OpDef& def = op("sort");
  std::vector<Tensor> out =
      dispatch(def, {x}, {{"dim", dim}, {"descending", descending}, {"stable", stable}});
  return {std::move(out[0]), std::move(out[1])};
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  static const OpDef& def = op("argsort");
  return dispatch1(def, {x}, {{"dim", dim}, {"descending", descending}, {"stable", stable}});
}

std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest,
                                bool sorted) {
  static const OpDef& def = op("topk");
  std::vector<Tensor> out =
      dispatch(def, {x}, {{"k", k}, {"dim", dim}, {"largest", largest}, {"sorted", sorted}});
  return {std::move(out[0]), std::move(out[1])};
}

}  // namespace kiln
