// dft: the discrete Fourier transform along one dim of a tensor whose last
// dim holds a complex number as [real, imaginary] (or a real number as
// [real]): ONNX's DFT, and torch.fft's fft / ifft / rfft / irfft on
// torch.view_as_real's form of a complex tensor.
//
// Any length: a radix-2 FFT for powers of two, Bluestein's chirp-z
// transform (three radix-2 FFTs of a power of two >= 2n - 1) for the rest,
// so every length costs O(n log n). Sums are in double whatever the dtype.
#pragma once

#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

struct DftParams {
  int axis = 0;        // the transformed dim of x and out (never the last)
  int64_t length = 0;  // the transform's size n (x is zero-padded or cut to it)
  bool inverse = false;
  // Forward: x real ([..., 1]), out the n / 2 + 1 bins of a real signal's
  // spectrum. Inverse: x those bins, out the real signal of n samples
  // ([..., 1]); the imaginary parts of bin 0 and (n even) bin n / 2 are
  // ignored, as a real signal's are 0.
  bool onesided = false;
};

// out[..., k, ..., :] = sum_j x[..., j, ..., :] e^(-+2 pi i jk / n) (the
// inverse divided by n). x and out are float32 or float64 of one dtype, any
// strides; x's last dim has size 1 or 2, out's 2 (1 for the onesided inverse).
void dft(const StridedView& out, const StridedView& x, const DftParams& p);

}  // namespace kiln::cpu
