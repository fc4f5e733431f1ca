// scatter(self, index, src; dim, reduce): src's elements written into a copy
// of self at the positions index names along dim (kernels/cpu/scatter.h).
// A 0-d src is one value for every position (torch.scatter's value form, a
// wrapped number; a 0-d tensor is taken the same way).
#include "kiln/core/factory.h"
#include "kiln/core/shape.h"
#include "kiln/kernels/cpu/scatter.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/registry.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/view.h"

namespace kiln {
namespace {

// A 0-d tensor counts as 1-D of size 1, as in PyTorch.
DimList as_at_least_1d(const DimList& shape) {
  return shape.empty() ? DimList{1} : shape;
}

cpu::ScatterReduce reduce_of(const std::string& reduce) {
  if (reduce == "add") return cpu::ScatterReduce::Add;
  if (reduce == "multiply") return cpu::ScatterReduce::Multiply;
  KILN_CHECK(reduce == "none", "scatter: reduce argument must be either add or multiply, got '",
             reduce, "'");
  return cpu::ScatterReduce::None;
}

InferResult infer_scatter(const InferArgs& args) {
  const TensorMeta &self = args.inputs[0], &index = args.inputs[1], &src = args.inputs[2];
  KILN_CHECK_TYPE(index.dtype == DType::Int64 || index.dtype == DType::Int32,
                  "scatter: expected an int64 or int32 index tensor, got ", index.dtype, " (shape ",
                  index.shape, ")");
  reduce_of(args.attrs.get_string("reduce"));
  const int64_t d = wrap_dim(args.attrs.get_int("dim"), self.dim(), "scatter", self.shape);
  const bool value_form = src.dim() == 0;
  const DimList s = as_at_least_1d(self.shape), i = as_at_least_1d(index.shape),
                x = as_at_least_1d(src.shape);
  KILN_CHECK(i.size() == s.size() && (value_form || x.size() == s.size()),
             "scatter: Index tensor must have the same number of dimensions as self tensor and "
             "src tensor (index shape ",
             index.shape, ", self shape ", self.shape, ", src shape ", src.shape, ")");
  for (size_t k = 0; k < i.size() && !definitely_less(numel_of(index.shape), 1); ++k) {
    KILN_CHECK((int64_t(k) == d || !definitely_less(s[k], i[k])) &&
                   (value_form || !definitely_less(x[k], i[k])),
               "scatter: Expected index ", index.shape, " to be smaller than self ", self.shape,
               " apart from dimension ", d, " and to be smaller size than src ", src.shape);
  }
  return InferResult{{TensorMeta{self.dtype, self.shape}}, {self.dtype, index.dtype, self.dtype}};
}

void scatter_kernel(const KernelArgs& args) {
  const cpu::StridedView& out = args.outputs[0];
  int64_t dim = args.attrs.get_int("dim");
  if (dim < 0) dim += std::max(out.ndim, 1);
  cpu::scatter(out, args.inputs[0], args.inputs[1], args.inputs[2], int(dim),
               reduce_of(args.attrs.get_string("reduce")));
}

// src[i][j] landed at out[index[i][j]][j], so its gradient is gathered from
// there; where index is smaller than src, the entries it never reads get
// zero. With replacement, self's gradient is zero where src landed, which
// is a scatter of zeros into g.
std::vector<Tensor> scatter_grad(const GradContext& ctx) {
  const std::string& reduce = ctx.attrs().get_string("reduce");
  KILN_CHECK(reduce != "multiply",
             "scatter: the derivative of reduce='multiply' is not implemented (as in PyTorch)");
  const Tensor& g = ctx.grad_output(0);
  int64_t d = ctx.attrs().get_int("dim");
  if (d < 0) d += std::max<int64_t>(ctx.input_meta(0).dim(), 1);
  Tensor g_self;
  if (ctx.needs_input_grad(0)) {
    g_self = reduce == "add" ? g : scatter(g, d, ctx.input(1), Scalar(0.0));
  }
  if (!ctx.needs_input_grad(2)) return {g_self, Tensor(), Tensor()};
  Tensor g_src = gather(g, d, ctx.input(1));
  const IntList& want = ctx.input_shape(2);
  if (want.empty()) return {g_self, Tensor(), sum(g_src)};  // one value, written everywhere
  IntList shape = g_src.shape();
  for (size_t k = 0; k < want.size() && k < shape.size(); ++k) {
    if (shape[k] == want[k]) continue;
    const int64_t read = shape[k];
    shape[k] = want[k];
    g_src = slice_scatter(zeros(shape, g.dtype()), g_src, int64_t(k), 0, read);
  }
  return {g_self, Tensor(), reshape(g_src, want)};
}

Attrs scatter_attrs(int64_t dim, const std::string& reduce) {
  return {{"dim", dim}, {"reduce", reduce}};
}

}  // namespace

void register_scatter_ops(OpRegistry& registry) {
  const AttrValue none;
  registry.add(OpDef{
      .name = "scatter",
      .min_inputs = 3,
      .max_inputs = 3,
      .attrs = {{"dim", AttrKind::Int, none}, {"reduce", AttrKind::String, std::string("none")}},
      .infer = infer_scatter,
      .cpu = scatter_kernel,
      .grad = scatter_grad,
      .may_run_inplace = true,
      .onnx = {""}});
}

Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
               const std::string& reduce) {
  static const OpDef& def = op("scatter");
  return dispatch1(def, {self, index, src}, scatter_attrs(dim, reduce));
}
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, Scalar value,
               const std::string& reduce) {
  return scatter(self, dim, index, wrap_scalar(value), reduce);
}
const Tensor& scatter_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                       const std::string& reduce) {
  static const OpDef& def = op("scatter");
  return apply_inplace(def, self, {index, src}, scatter_attrs(dim, reduce));
}
const Tensor& scatter_(const Tensor& self, int64_t dim, const Tensor& index, Scalar value,
                       const std::string& reduce) {
  return scatter_(self, dim, index, wrap_scalar(value), reduce);
}

}  // namespace kiln
