// The discrete Fourier transform on kiln's real tensors: a complex number
// is a trailing dim of 2 ([real, imaginary], torch.view_as_real's form), a
// real one a trailing dim of 1 (ONNX DFT's form). kiln.fft composes
// torch.fft's functions of it.
#pragma once

#include "kiln/core/tensor.h"

namespace kiln {

// The DFT of x [..., m, ..., 1 or 2] along `axis` (not the last dim; negative
// counts from the end of x), of size `length` (0: m; x is zero-padded or cut
// to it): [..., n, ..., 2]. inverse divides by n. onesided: forward, a real
// x and the n / 2 + 1 bins of its spectrum (rfft); inverse, those bins of a
// real signal's spectrum in, the n real samples out as [..., n, ..., 1]
// (irfft; length 0 means 2 (m - 1)).
Tensor dft(const Tensor& x, int64_t axis, int64_t length = 0, bool inverse = false,
           bool onesided = false);

class OpRegistry;
// Registered by register_builtin_ops (ops/registry.cpp).
void register_spectral_ops(OpRegistry& registry);  // dft (ops/spectral.cpp)
void register_det_ops(OpRegistry& registry);       // det, det_cofactor (ops/det.cpp)

}  // namespace kiln
