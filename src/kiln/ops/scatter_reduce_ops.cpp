// scatter_reduce(self, index, src; dim, reduce, include_self) for reduce
// amax and amin (torch.scatter_reduce; ONNX's reduction max and min of
// ScatterElements and ScatterND from opset 18): kernels/cpu/scatter_reduce.h.
// scatter covers none, add (sum) and multiply (prod).
//
// No backward rule yet: PyTorch's gradient splits among the tied maxima,
// which needs a kernel of its own; backward through it is an error naming
// the op.
#include "kiln/kernels/cpu/scatter_reduce.h"
#include "kiln/ops/registry.h"

namespace kiln {
namespace {

cpu::ScatterExtreme extreme_of(const std::string& reduce) {
  KILN_CHECK_VALUE(reduce == "amax" || reduce == "amin",
                   "scatter_reduce: reduce must be 'amax' or 'amin', got '", reduce,
                   "' (scatter does sum and prod)");
  return reduce == "amax" ? cpu::ScatterExtreme::Max : cpu::ScatterExtreme::Min;
}

InferResult infer_scatter_reduce(const InferArgs& args) {
  const TensorMeta &self = args.inputs[0], &index = args.inputs[1], &src = args.inputs[2];
  extreme_of(args.attrs.get_string("reduce"));
  KILN_CHECK_TYPE(index.dtype == DType::Int64 || index.dtype == DType::Int32,
                  "scatter_reduce: expected an int64 or int32 index tensor, got ", index.dtype);
  KILN_CHECK_TYPE(src.dtype == self.dtype, "scatter_reduce: expected src to have self's dtype ",
                  self.dtype, ", got ", src.dtype);
  KILN_CHECK_TYPE(self.dtype != DType::Bool, "scatter_reduce: amax and amin of bool tensors");
  const int64_t rank = std::max<int64_t>(self.dim(), 1);
  const int64_t dim = args.attrs.get_int("dim");
  KILN_CHECK_INDEX(dim >= -rank && dim < rank, "scatter_reduce: dim ", dim,
                   " is out of range for a tensor of shape ", self.shape);
  KILN_CHECK(index.dim() == self.dim() && src.dim() == self.dim(), "scatter_reduce: index ",
             index.shape, " and src ", src.shape, " must have as many dims as self ", self.shape);
  const int64_t d = dim < 0 ? dim + rank : dim;
  for (int64_t k = 0; k < index.dim(); ++k) {
    KILN_CHECK(!definitely_less(src.shape[size_t(k)], index.shape[size_t(k)]) &&
                   (k == d || !definitely_less(self.shape[size_t(k)], index.shape[size_t(k)])),
               "scatter_reduce: expected index ", index.shape, " to be no larger than src ",
               src.shape, " and than self ", self.shape, " apart from dim ", d);
  }
  return InferResult{{TensorMeta{self.dtype, self.shape}}, {}};
}

void scatter_reduce_kernel(const KernelArgs& args) {
  const cpu::StridedView& out = args.outputs[0];
  int64_t dim = args.attrs.get_int("dim");
  if (dim < 0) dim += std::max(out.ndim, 1);
  cpu::scatter_extreme(out, args.inputs[0], args.inputs[1], args.inputs[2], int(dim),
                       extreme_of(args.attrs.get_string("reduce")),
                       args.attrs.get_bool("include_self"));
}

}  // namespace

void register_scatter_reduce_ops(OpRegistry& registry) {
  registry.add(OpDef{.name = "scatter_reduce",
                     .min_inputs = 3,
                     .max_inputs = 3,
                     .attrs = {{"dim", AttrKind::Int, AttrValue{}},
                               {"reduce", AttrKind::String, AttrValue{}},
                               {"include_self", AttrKind::Bool, true}},
                     .infer = infer_scatter_reduce,
                     .cpu = scatter_reduce_kernel,
                     .kind = OpKind::Opaque,
                     .onnx = onnx_not_exportable(
                         "no exporter writes it yet: its ONNX form is ScatterElements with "
                         "reduction max or min (opset 18), a hand-written translation")});
}

}  // namespace kiln
