// pad and pad_backward: PyTorch's F.pad as one op (its four modes differ
// only in which input element an output coordinate reads), and the sum of
// the output gradient back onto the elements read. pad is linear in its
// input (the constant aside), so pad_backward's gradient is pad again.
#include "kiln/kernels/cpu/pad.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/infer_util.h"
#include "kiln/ops/registry.h"
#include "kiln/ops/resample.h"

namespace kiln {
namespace {

constexpr char kPad[] = "pad";

cpu::PadMode mode_of(const std::string& mode) {
  if (mode == "constant") return cpu::PadMode::Constant;
  if (mode == "reflect") return cpu::PadMode::Reflect;
  if (mode == "replicate") return cpu::PadMode::Replicate;
  KILN_CHECK_KIND(ErrorKind::NotImplemented, mode == "circular", "pad: unrecognised padding mode ",
                  mode, " (expected constant, reflect, replicate or circular)");
  return cpu::PadMode::Circular;
}

struct PadGeometry {
  cpu::PadParams params;
  DimList shape;
};

// The checks of the non-constant modes, for the dims the pad list covers:
// `padded` of them, the last ones of x.
void check_border_mode(const TensorMeta& x, const std::string& mode, size_t padded,
                       bool has_value) {
  KILN_CHECK(!has_value, "pad: padding mode \"", mode, "\" doesn't take in value argument");
  const size_t ndim = x.shape.size();
  KILN_CHECK_KIND(ErrorKind::NotImplemented,
                  padded >= 1 && padded <= 3 && (ndim == padded + 1 || ndim == padded + 2),
                  "pad: padding size ", 2 * padded, " is not supported for ", ndim,
                  "D input tensor (", mode, " padding of the last k dims takes a (k + 1)-D or ",
                  "(k + 2)-D input)");
  if (mode == "circular") return;
  // Every dim but the batch dim (a (k + 2)-D input's first) must be non-empty.
  for (size_t d = ndim - padded - 1; d < ndim; ++d) {
    KILN_CHECK(!definitely_less(x.shape[d], 1), "pad: expected ", padded + 1, "D or ", padded + 2,
               "D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions "
               "for input, but got: ",
               x.shape);
  }
}

void check_dim(const Dim& size, int64_t before, int64_t after, cpu::PadMode mode, size_t d,
               const DimList& shape) {
  if (mode == cpu::PadMode::Reflect) {
    KILN_CHECK(!definitely_less(size, std::max(before, after) + 1),
               "pad: padding size should be less than the corresponding input dimension, but "
               "got: padding (",
               before, ", ", after, ") at dimension ", d, " of input ", shape);
  }
  if (mode == cpu::PadMode::Circular) {
    const Dim kept = size - std::max<int64_t>(-before, 0) - std::max<int64_t>(-after, 0);
    KILN_CHECK(!definitely_less(kept, std::max<int64_t>({before, after, 0})),
               "pad: padding value causes wrapping around more than once (padding (", before, ", ",
               after, ") at dimension ", d, " of input ", shape, ")");
  }
  KILN_CHECK(!definitely_less(size + before + after, 0), "pad: the input size ", size,
             ", plus negative padding ", before, " and ", after,
             " resulted in a negative output size, which is invalid. Check dimension ", d,
             " of your input.");
}

PadGeometry pad_geometry(const TensorMeta& x, const Attrs& attrs) {
  const IntList& pad = attrs.get_ints("pad");
  const std::string& mode = attrs.get_string("mode");
  PadGeometry g;
  g.params.mode = mode_of(mode);
  KILN_CHECK(pad.size() % 2 == 0, "pad: padding length must be divisible by 2, got ", pad);
  const size_t padded = pad.size() / 2, ndim = x.shape.size();
  KILN_CHECK(padded <= ndim,
             "pad: padding length should be less than or equal to two times the input "
             "dimension but got padding length ",
             pad.size(), " and input of dimension ", ndim);
  const bool has_value = attrs.has("value");
  if (g.params.mode != cpu::PadMode::Constant) check_border_mode(x, mode, padded, has_value);
  if (has_value) g.params.value = attrs.get_float("value");
  g.shape = x.shape;
  // pad[0], pad[1] are the last dim's, pad[2], pad[3] the one before, ...
  for (size_t i = 0; i < padded; ++i) {
    const size_t d = ndim - 1 - i;
    const int64_t before = pad[2 * i], after = pad[2 * i + 1];
    check_dim(x.shape[d], before, after, g.params.mode, d, x.shape);
    g.params.before[d] = before;
    g.params.after[d] = after;
    g.shape[d] = x.shape[d] + before + after;
  }
  return g;
}

InferResult infer_pad(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  return InferResult{{TensorMeta{x.dtype, pad_geometry(x, args.attrs).shape}}, {}};
}

cpu::PadParams params_for(const cpu::StridedView& x, const Attrs& attrs) {
  const TensorMeta meta{x.dtype, DimList(x.shape, x.shape + x.ndim)};
  return pad_geometry(meta, attrs).params;
}

void pad_kernel(const KernelArgs& args) {
  cpu::pad(args.outputs[0], args.inputs[0], params_for(args.inputs[0], args.attrs));
}

// ---- pad_backward(grad_out; input_size, pad, mode) ---------------------

InferResult infer_pad_backward(const InferArgs& args) {
  check_floating(args, 0);
  const TensorMeta& dy = args.inputs[0];
  const TensorMeta x{dy.dtype, args.attrs.get_dims("input_size")};
  const DimList expected = pad_geometry(x, args.attrs).shape;
  KILN_CHECK(dy.shape == expected, args.op.name, ": expected grad_output of shape ", expected,
             " (pad's output), got ", dy.shape);
  return InferResult{{x}, {}};
}

void pad_backward_kernel(const KernelArgs& args) {
  cpu::pad_backward(args.outputs[0], args.inputs[0], params_for(args.outputs[0], args.attrs));
}

// y = P x + c: dx = Pᵀ dy, which sums dy over the outputs reading each input.
std::vector<Tensor> pad_grad(const GradContext& ctx) {
  static const OpDef& backward = op("pad_backward");
  const Attrs& a = ctx.attrs();
  return {dispatch1(backward, {ctx.grad_output(0)},
                    {{"input_size", ctx.input_shape(0)},
                     {"pad", a.get_ints("pad")},
                     {"mode", a.get_string("mode")}})};
}

// dx = Pᵀ dy is linear in dy: its gradient is P (with a zero constant).
std::vector<Tensor> pad_backward_grad(const GradContext& ctx) {
  static const OpDef& forward = op(kPad);
  const Attrs& a = ctx.attrs();
  return {dispatch1(forward, {ctx.grad_output(0)},
                    {{"pad", a.get_ints("pad")}, {"mode", a.get_string("mode")}})};
}

}  // namespace

void register_pad_ops(OpRegistry& registry) {
  const AttrSpec pad{"pad", AttrKind::Ints, {}};
  const AttrSpec mode{"mode", AttrKind::String, std::string("constant")};
  registry.add(OpDef{.name = kPad,
                     .attrs = {pad, mode, {"value", AttrKind::Float, {}, true}},
                     .infer = infer_pad,
                     .cpu = pad_kernel,
                     .grad = pad_grad,
                     .kind = OpKind::Opaque,
                     .onnx = {"Pad"}});
  registry.add(
      OpDef{.name = "pad_backward",
            .attrs = {{"input_size", AttrKind::Ints, {}}, pad, mode},
            .infer = infer_pad_backward,
            .cpu = pad_backward_kernel,
            .grad = pad_backward_grad,
            .kind = OpKind::Opaque,
            .onnx = onnx_not_exportable("a backward op of pad: ONNX models hold forward graphs")});
}

Tensor pad(const Tensor& x, IntList pad, const std::string& mode, std::optional<double> value) {
  static const OpDef& pad_op = op(kPad);
  Attrs attrs{{"pad", std::move(pad)}, {"mode", mode}};
  if (value) attrs.set("value", *value);
  return dispatch1(pad_op, {x}, attrs);
}

}  // namespace kiln
