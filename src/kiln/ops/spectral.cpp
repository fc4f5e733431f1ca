// dft: the discrete Fourier transform along one dim (ops/spectral.h,
// kernels/cpu/fft.h), the op under ONNX's DFT and STFT and kiln.fft.
//
// Every form is linear in x, so its gradient is the adjoint map, another dft:
//   full forward  y = F x            grad = n ifft(g)       (F^H = n F^-1)
//   full inverse  y = F^-1 x         grad = fft(g) / n
//   rfft          y = first bins of F x, x real
//                 grad = Re(n ifft(g zero-padded to n bins))
//   irfft         y = Re(F^-1 hermitian(x)), y real
//                 grad = rfft(g) w, w = 2 / n but 1 / n at bins 0 and n / 2
//                 (the bins a real signal's spectrum holds once)
// each then cut or zero-padded back from n to x's m along the axis, and for
// a real x ([..., 1]) its real part.
#include "kiln/ops/spectral.h"

#include "kiln/core/factory.h"
#include "kiln/kernels/cpu/fft.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/registry.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/view.h"

namespace kiln {
namespace {

struct DftForm {
  int64_t axis;  // wrapped
  bool inverse, onesided;
  bool to_real() const { return inverse && onesided; }
};

DftForm form_of(const Attrs& attrs, int64_t rank, const DimList& shape) {
  int64_t axis = attrs.get_int("axis");
  const int64_t given = axis;
  if (axis < 0) axis += rank;
  KILN_CHECK_INDEX(axis >= 0 && axis < rank - 1, "dft: axis ", given,
                   " is out of range for an input of shape ", shape,
                   " (the last dim holds the real and imaginary parts)");
  return DftForm{axis, attrs.get_bool("inverse"), attrs.get_bool("onesided")};
}

// The transform's size: the attribute, or what the input's size along the
// axis implies.
Dim transform_length(const Attrs& attrs, const DftForm& form, const Dim& m) {
  const int64_t length = attrs.get_int("length");
  if (length > 0) return length;
  return form.to_real() ? 2 * (m - 1) : m;
}

InferResult infer_dft(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  KILN_CHECK_TYPE(x.dtype == DType::Float32 || x.dtype == DType::Float64,
                  "dft: expected a float32 or float64 input, got ", x.dtype);
  KILN_CHECK(x.dim() >= 2, "dft: expected an input [..., n, ..., 1 or 2], got shape ", x.shape);
  const Dim& parts = x.shape.back();
  KILN_CHECK(parts.is_static() && (parts.static_value() == 1 || parts.static_value() == 2),
             "dft: expected a last dim of 1 (real) or 2 (real, imaginary), got shape ", x.shape);
  const DftForm form = form_of(args.attrs, x.dim(), x.shape);
  const bool complex_in = parts.static_value() == 2;
  KILN_CHECK(!(form.onesided && !form.inverse && complex_in),
             "dft: a onesided forward transform takes a real input [..., 1], got shape ", x.shape);
  KILN_CHECK(!(form.to_real() && !complex_in),
             "dft: a onesided inverse transform takes a complex input [..., 2], got shape ",
             x.shape);
  const int64_t length = args.attrs.get_int("length");
  KILN_CHECK_VALUE(length >= 0, "dft: length must be positive (0: the input's), got ", length);
  const Dim n = transform_length(args.attrs, form, x.shape[size_t(form.axis)]);
  KILN_CHECK_VALUE(!definitely_less(n, 1), "dft: the transform's length must be at least 1, got ",
                   n, " for an input of shape ", x.shape);
  DimList shape = x.shape;
  shape[size_t(form.axis)] = form.onesided && !form.inverse ? floordiv(n, 2) + 1 : n;
  shape.back() = form.to_real() ? 1 : 2;
  return InferResult{{TensorMeta{x.dtype, shape}}, {}};
}

void dft_kernel(const KernelArgs& args) {
  const cpu::StridedView& x = args.inputs[0];
  DimList shape;
  const DftForm form = form_of(args.attrs, x.ndim, shape);
  const int64_t length = args.attrs.get_int("length");
  const int64_t m = x.shape[form.axis];
  cpu::DftParams p{.axis = int(form.axis),
                   .length = length > 0 ? length : (form.to_real() ? 2 * (m - 1) : m),
                   .inverse = form.inverse,
                   .onesided = form.onesided};
  cpu::dft(args.outputs[0], x, p);
}

// t cut or zero-padded to `size` along `axis`.
Tensor fit(const Tensor& t, int64_t axis, int64_t size) {
  const int64_t have = t.shape()[size_t(axis)];
  if (have >= size) return have == size ? t : narrow(t, axis, 0, size);
  IntList pad_shape = t.shape();
  pad_shape[size_t(axis)] = size - have;
  return cat({t, zeros(pad_shape, TensorOptions(t.dtype()))}, axis);
}

// irfft's weights per bin, shaped to broadcast along `axis` of a rank-`rank` tensor.
Tensor irfft_weights(int64_t n, int64_t axis, int64_t rank, DType dtype) {
  const int64_t bins = n / 2 + 1;
  std::vector<double> w(size_t(bins), 2.0 / double(n));
  w[0] = 1.0 / double(n);
  if (n % 2 == 0) w.back() = 1.0 / double(n);
  IntList shape(size_t(rank - axis), 1);
  shape[0] = bins;
  return tensor(w, shape, dtype);
}

std::vector<Tensor> dft_grad(const GradContext& ctx) {
  if (!ctx.needs_input_grad(0)) return {Tensor()};
  const IntList in_shape = ctx.input_shape(0);
  const int64_t rank = int64_t(in_shape.size());
  const DftForm form = form_of(ctx.attrs(), rank, to_dims(in_shape));
  const int64_t m = in_shape[size_t(form.axis)];
  const int64_t n = transform_length(ctx.attrs(), form, m).static_value();
  const Tensor& g = ctx.grad_output(0);
  Tensor grad;
  if (form.to_real()) {
    const Tensor bins = dft(g, form.axis, n, /*inverse=*/false, /*onesided=*/true);
    grad = bins * irfft_weights(n, form.axis, rank, g.dtype());
  } else if (form.inverse) {
    grad = dft(g, form.axis, n) / double(n);
  } else {
    grad = dft(g, form.axis, n, /*inverse=*/true) * double(n);  // rfft's g is zero-padded to n
  }
  grad = fit(grad, form.axis, m);
  return {in_shape.back() == 1 ? narrow(grad, rank - 1, 0, 1) : grad};
}

}  // namespace

Tensor dft(const Tensor& x, int64_t axis, int64_t length, bool inverse, bool onesided) {
  static const OpDef& dft_op = op("dft");
  return dispatch1(
      dft_op, {x},
      Attrs{{"axis", axis}, {"length", length}, {"inverse", inverse}, {"onesided", onesided}});
}

void register_spectral_ops(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "dft",
      .attrs = {{"axis", AttrKind::Int, int64_t(-2)},
                {"length", AttrKind::Int, int64_t(0)},
                {"inverse", AttrKind::Bool, false},
                {"onesided", AttrKind::Bool, false}},
      .infer = infer_dft,
      .cpu = dft_kernel,
      .grad = dft_grad,
      .kind = OpKind::Opaque,
      .onnx = onnx_not_exportable(
          "ONNX's DFT takes dft_length (and from opset 20 the axis) as inputs, not attributes; "
          "no exporter writes them yet (ONNX DFT and STFT import to it: import_signal.cpp)")});
}

}  // namespace kiln
