// cumsum, cumprod, flip and roll: ops that walk a tensor along dims and
// write every element, in a new order or as a running total.
#include "kiln/ops/scan.h"

#include <map>

#include "kiln/kernels/cpu/scan.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/kernel_util.h"
#include "kiln/ops/registry.h"

namespace kiln {
namespace {

int wrapped(int64_t dim, int ndim) {
  return int(dim < 0 ? dim + std::max(ndim, 1) : dim);
}

// ---- cumsum, cumprod ----

// As sum: a given dtype converts the input first; otherwise bool and integer
// inputs give int64. The kernel sees input and output in one dtype.
InferResult infer_cumulative(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  wrap_dim(args.attrs.get_int("dim"), x.dim(), args.op.name, x.shape);
  DType out = is_floating(x.dtype) ? x.dtype : DType::Int64;
  if (args.attrs.has("dtype")) out = args.attrs.get_dtype("dtype");
  return InferResult{{TensorMeta{out, x.shape}}, {out}};
}

template <cpu::ScanKind Kind>
void cumulative_kernel(const KernelArgs& args) {
  const cpu::StridedView& x = args.inputs[0];
  cpu::cumulative(Kind, args.outputs[0], x, wrapped(args.attrs.get_int("dim"), x.ndim));
}

// The running sum from the end: out[i] = t[i] + ... + t[n - 1] along dim.
Tensor reverse_cumsum(const Tensor& t, int64_t dim) {
  return flip(cumsum(flip(t, {dim}), dim), {dim});
}

// d out[k] / d x[i] = 1 for every k >= i: the gradient summed from the end.
std::vector<Tensor> cumsum_grad(const GradContext& ctx) {
  if (!ctx.needs_input_grad(0)) return {Tensor()};
  const Tensor& g = ctx.grad_output(0);
  if (ctx.input_meta(0).dim() == 0) return {g};
  return {reverse_cumsum(g, ctx.attrs().get_int("dim"))};
}

// d out[k] / d x[i] = prod_{j <= k, j != i} x[j] for k >= i. Along each line,
// with z the first zero of x:
//   i < z:  sum_{k >= i} g[k] out[k] / x[i]  (x[i] != 0; out[k] = 0 past z)
//   i = z:  sum_{k >= z} g[k] cumprod(x with x[z] = 1)[k]  (no division)
//   i > z:  0 (every product holds x[z] = 0)
// PyTorch's cumprod_backward takes the same cases; built from ops so it is
// differentiable again.
std::vector<Tensor> cumprod_grad(const GradContext& ctx) {
  if (!ctx.needs_input_grad(0)) return {Tensor()};
  const Tensor& g = ctx.grad_output(0);
  if (ctx.input_meta(0).dim() == 0) return {g};
  const int64_t dim = ctx.attrs().get_int("dim");
  const Tensor x = ctx.input(0);
  const Tensor is_zero = x == 0.0;
  const Tensor zeros_so_far = cumsum(is_zero, dim);
  const Tensor before_zero = zeros_so_far == int64_t(0);
  const Tensor first_zero = is_zero * (zeros_so_far == int64_t(1));
  const Tensor grad_before = reverse_cumsum(g * ctx.output(0), dim) / where(before_zero, x, 1.0);
  const Tensor grad_at_zero = reverse_cumsum(g * cumprod(where(first_zero, 1.0, x), dim), dim);
  return {where(before_zero, grad_before, where(first_zero, grad_at_zero, 0.0))};
}

// ---- flip ----

IntList checked_dims(const InferArgs& args, const IntList& dims) {
  const TensorMeta& x = args.inputs[0];
  IntList wrapped_dims;
  for (int64_t dim : dims) {
    const int64_t d = wrap_dim(dim, x.dim(), args.op.name, x.shape);
    KILN_CHECK(std::find(wrapped_dims.begin(), wrapped_dims.end(), d) == wrapped_dims.end(),
               args.op.name, ": dim ", d, " appears multiple times in the list of dims (shape ",
               x.shape, ")");
    wrapped_dims.push_back(d);
  }
  return wrapped_dims;
}

InferResult infer_flip(const InferArgs& args) {
  checked_dims(args, args.attrs.get_ints("dims"));
  const TensorMeta& x = args.inputs[0];
  return InferResult{{TensorMeta{x.dtype, x.shape}}, {}};
}

// The dims a 0-d tensor is given (0 or -1) leave nothing to reverse.
void flip_kernel(const KernelArgs& args) {
  const cpu::StridedView& x = args.inputs[0];
  std::vector<int> dims;
  for (int64_t d : args.attrs.get_ints("dims")) {
    if (x.ndim > 0) dims.push_back(wrapped(d, x.ndim));
  }
  cpu::flip(args.outputs[0], x, dims);
}

std::vector<Tensor> flip_grad(const GradContext& ctx) {
  if (!ctx.needs_input_grad(0)) return {Tensor()};
  return {flip(ctx.grad_output(0), ctx.attrs().get_ints("dims"))};
}

// ---- roll ----

InferResult infer_roll(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  const IntList& shifts = args.attrs.get_ints("shifts");
  const IntList& dims = args.attrs.get_ints("dims");
  KILN_CHECK(!shifts.empty(), "roll: `shifts` required (shape ", x.shape, ")");
  KILN_CHECK(shifts.size() == dims.size() || (dims.empty() && shifts.size() == 1),
             "roll: shifts and dimensions must align. shifts: ", shifts.size(),
             ", dims:", dims.size());
  for (int64_t dim : dims) {
    KILN_CHECK_INDEX(x.dim() > 0, "roll: Dimension specified as ", dim,
                     " but tensor has no dimensions");
    wrap_dim(dim, x.dim(), "roll", x.shape);
  }
  return InferResult{{TensorMeta{x.dtype, x.shape}}, {}};
}

// Without dims, the row-major order of the elements rotates: the input is
// packed first so that order is one run of memory.
void roll_flat(const cpu::StridedView& out, const cpu::StridedView& in, int64_t shift) {
  KILN_ASSERT(out.is_contiguous(), "roll: output must be contiguous");
  const ContiguousInput packed(in);
  cpu::StridedView flat_in, flat_out = out;
  flat_in.data = const_cast<void*>(packed.data<void>());
  flat_in.dtype = in.dtype;
  flat_in.ndim = flat_out.ndim = 1;
  flat_in.shape[0] = flat_out.shape[0] = in.numel();
  flat_in.strides[0] = flat_out.strides[0] = 1;
  const int dims[] = {0};
  const int64_t shifts[] = {shift};
  cpu::roll(flat_out, flat_in, dims, shifts);
}

// A dim given twice rolls by the sum of its shifts.
void roll_kernel(const KernelArgs& args) {
  const cpu::StridedView& x = args.inputs[0];
  const IntList& shifts = args.attrs.get_ints("shifts");
  const IntList& dims = args.attrs.get_ints("dims");
  if (dims.empty()) {
    roll_flat(args.outputs[0], x, shifts[0]);
    return;
  }
  std::map<int, int64_t> total;
  for (size_t j = 0; j < dims.size(); ++j) {
    const int d = wrapped(dims[j], x.ndim);
    const int64_t size = x.shape[d];
    total[d] = size == 0 ? 0 : (total[d] + shifts[j] % size) % size;
  }
  std::vector<int> rolled_dims;
  IntList rolled_shifts;
  for (const auto& [d, shift] : total) {
    rolled_dims.push_back(d);
    rolled_shifts.push_back(shift);
  }
  cpu::roll(args.outputs[0], x, rolled_dims, rolled_shifts);
}

std::vector<Tensor> roll_grad(const GradContext& ctx) {
  if (!ctx.needs_input_grad(0)) return {Tensor()};
  IntList back = ctx.attrs().get_ints("shifts");
  for (int64_t& shift : back)
    shift = -shift;
  return {roll(ctx.grad_output(0), back, ctx.attrs().get_ints("dims"))};
}

}  // namespace

void register_scan_ops(OpRegistry& registry) {
  const AttrValue none;
  const std::vector<AttrSpec> dim_dtype = {{"dim", AttrKind::Int, none},
                                           {"dtype", AttrKind::DType, none, true}};
  registry.add(OpDef{.name = "cumsum",
                     .attrs = dim_dtype,
                     .infer = infer_cumulative,
                     .cpu = cumulative_kernel<cpu::ScanKind::Sum>,
                     .grad = cumsum_grad,
                     .onnx = {"CumSum"}});
  registry.add(OpDef{.name = "cumprod",
                     .attrs = dim_dtype,
                     .infer = infer_cumulative,
                     .cpu = cumulative_kernel<cpu::ScanKind::Prod>,
                     .grad = cumprod_grad,
                     .onnx = {""}});
  // A copy, as PyTorch's (kiln views have no negative strides). ONNX has no
  // Flip: a Slice with step -1 per dim.
  registry.add(OpDef{.name = "flip",
                     .attrs = {{"dims", AttrKind::Ints, none}},
                     .infer = infer_flip,
                     .cpu = flip_kernel,
                     .grad = flip_grad,
                     .onnx = {""}});
  registry.add(
      OpDef{.name = "roll",
            .attrs = {{"shifts", AttrKind::Ints, none}, {"dims", AttrKind::Ints, IntList{}}},
            .infer = infer_roll,
            .cpu = roll_kernel,
            .grad = roll_grad,
            .onnx = {""}});
}

Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  static const OpDef& def = op("cumsum");
  Attrs attrs{{"dim", dim}};
  if (dtype) attrs.set("dtype", *dtype);
  return dispatch1(def, {x}, attrs);
}

Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  static const OpDef& def = op("cumprod");
  Attrs attrs{{"dim", dim}};
  if (dtype) attrs.set("dtype", *dtype);
  return dispatch1(def, {x}, attrs);
}

Tensor flip(const Tensor& x, const IntList& dims) {
  static const OpDef& def = op("flip");
  return dispatch1(def, {x}, {{"dims", dims}});
}

Tensor roll(const Tensor& x, const IntList& shifts, const IntList& dims) {
  static const OpDef& def = op("roll");
  return dispatch1(def, {x}, {{"shifts", shifts}, {"dims", dims}});
}

}  // namespace kiln
