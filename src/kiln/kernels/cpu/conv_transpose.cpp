#include "kiln/kernels/cpu/conv_transpose.h"

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

}  // namespace

void conv_transpose2d(const StridedView& out, const StridedView& x, const StridedView& w,
                      const StridedView& bias, const Conv2dParams& p) {
  if (out.numel() == 0) return;
  conv2d_backward_input(out, x, w, p);
  if (!bias.data) return;
  visit_floating(out.dtype, [&](auto t) { add_channel_bias<decltype(t)>(out, bias); });
}

}  // namespace kiln::cpu
