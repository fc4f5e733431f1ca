#include "kiln/kernels/cpu/conv_transpose.h"

#include <algorithm>
#include <vector>

#include "kiln/kernels/cpu/copy.h"
#include "kiln/kernels/cpu/loops.h"
#include "kiln/kernels/cpu/parallel.h"

namespace kiln::cpu {
namespace {

// out[n, c, :, :] += bias[c]; out is contiguous.
template <typename T>
void add_channel_bias(const StridedView& out, const StridedView& bias) {
  const int64_t C = out.shape[1], planes = out.shape[0] * C;
  const int64_t plane_size = out.shape[2] * out.shape[3];
  const T* b = bias.ptr<const T>();
  parallel_for(planes, out.numel() > kParallelGrain, [&](int64_t plane) {
    const T value = b[(plane % C) * bias.strides[0]];
    T* dst = out.ptr<T>() + plane * plane_size;
    for (int64_t i = 0; i < plane_size; ++i)
      dst[i] += value;
  });
}

// How many rows (cols) conv2d from out's size would give beyond x's own
// along spatial dim `d`: an output_padding of at least the stride (allowed
// when the dilation is larger) adds output rows that no row of x reaches.
int64_t missing_rows(const StridedView& out, const StridedView& x, const StridedView& w,
                     const Conv2dParams& p, int d) {
  const int64_t reach = out.shape[2 + d] + 2 * p.padding[d] - p.dilation[d] * (w.shape[2 + d] - 1);
  const int64_t natural = (reach - 1) / p.stride[d] + 1;
  return std::max<int64_t>(natural - x.shape[2 + d], 0);
}

// conv2d_backward_input(out, x, w, p) where x lacks rows or cols that conv2d
// from out's size would give: the backward kernels (oneDNN's) want the two
// sizes consistent, so x gets them as zeros, which add nothing.
void backward_input_padded(const StridedView& out, const StridedView& x, const StridedView& w,
                           const Conv2dParams& p, int64_t extra_h, int64_t extra_w) {
  StridedView padded = x;
  padded.shape[2] += extra_h;
  padded.shape[3] += extra_w;
  for (int d = 3; d >= 0; --d)
    padded.strides[d] = d == 3 ? 1 : padded.strides[d + 1] * padded.shape[d + 1];
  std::vector<char> buffer(size_t(padded.numel()) * element_size(x.dtype));
  padded.data = buffer.data();
  fill(padded, Scalar(0.0));
  StridedView window = padded;
  window.shape[2] = x.shape[2];
  window.shape[3] = x.shape[3];
  copy_convert(window, x);
  conv2d_backward_input(out, padded, w, p);
}

}  // namespace

void conv_transpose2d(const StridedView& out, const StridedView& x, const StridedView& w,
                      const StridedView& bias, const Conv2dParams& p) {
  if (out.numel() == 0) return;
  const int64_t extra_h = missing_rows(out, x, w, p, 0), extra_w = missing_rows(out, x, w, p, 1);
  if (extra_h == 0 && extra_w == 0) {
    conv2d_backward_input(out, x, w, p);
  } else {
    backward_input_padded(out, x, w, p, extra_h, extra_w);
  }
  if (!bias.data) return;
  visit_floating(out.dtype, [&](auto t) { add_channel_bias<decltype(t)>(out, bias); });
}

}  // namespace kiln::cpu
