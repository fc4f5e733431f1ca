// 2-D convolution: oneDNN for float32 (kiln's own kernels for depthwise
// convolutions and small problems), a direct loop for float64.
#pragma once

#include <cstdint>
#include <memory>

#include "kiln/kernels/cpu/conv_epilogue.h"
#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

struct Conv2dParams {
  int64_t stride[2] = {1, 1};
  int64_t padding[2] = {0, 0};
  int64_t dilation[2] = {1, 1};
  int64_t groups = 1;
  // x, out and the residual are channels-last: [N, H, W, C] (NHWC), the
  // layout oneDNN's blocked kernels use here (`acdb`), so a chain of
  // convolutions in a compiled graph runs without reordering between them
  // (jit/passes/carry_conv_layout.cpp). Weights stay [OC, C / groups, KH, KW].
  bool channels_last = false;
};

// out[N, OC, OH, OW] (contiguous) = conv(x[N, C, H, W], w[OC, C / groups, KH, KW]) + bias[OC].
// Shapes are already checked; x and w may have any strides; bias may be absent.
void conv2d(const StridedView& out, const StridedView& x, const StridedView& w,
            const StridedView& bias, const Conv2dParams& p);

// Small float32 problems (groups 1, no dilation, at most 16 output channels,
// a few million multiply-adds) go to kiln's own direct kernel instead of
// oneDNN (conv_direct.cpp; bench/kernel_choices.cpp measures both).
// An activation the direct kernel applies before storing, with the results
// of applying it to the output afterwards.
enum class ConvActivation { None, Relu, Sigmoid };
bool conv2d_direct_f32_applies(const StridedView& out, const StridedView& x, const StridedView& w,
                               const Conv2dParams& p);
void conv2d_direct_f32(const StridedView& out, const StridedView& x, const StridedView& w,
                       const StridedView& bias, const Conv2dParams& p,
                       ConvActivation activation = ConvActivation::None);
// With a fused epilogue (conv_epilogue.h), applied to each image as it is
// finished (in registers where it is relu or sigmoid and there is no residual).
void conv2d_direct_f32(const StridedView& out, const StridedView& x, const StridedView& w,
                       const StridedView& bias, const Conv2dParams& p, const ConvEpilogue& epilogue,
                       const StridedView& residual);

// Depthwise float32 convolutions (groups == in == out channels, no
// dilation: MobileNet's) go to kiln's own kernel (conv_depthwise.cpp): on
// NCHW oneDNN runs them as one tiny GEMM per channel.
bool conv2d_depthwise_f32_applies(const StridedView& out, const StridedView& x,
                                  const StridedView& w, const Conv2dParams& p);
// relu: applied as it stores, the bits relu over the output gives.
void conv2d_depthwise_f32(const StridedView& out, const StridedView& x, const StridedView& w,
                          const StridedView& bias, const Conv2dParams& p, bool relu = false);
// With a fused epilogue, applied to each output plane as it is finished
// (relu without a residual: in registers, as above).
void conv2d_depthwise_f32(const StridedView& out, const StridedView& x, const StridedView& w,
                          const StridedView& bias, const Conv2dParams& p,
                          const ConvEpilogue& epilogue, const StridedView& residual);

// Convolutions with few output pixels per weight go to kiln's GEMM, the
// filters packed as its b (conv_gemm.cpp): 1-D convolutions of one input
// channel with long kernels (an STFT written as a convolution), read in
// place as overlapping frames; spatial kernels over at most 16 output
// pixels and more than 16 filters, through a small buffer of patches. The
// epilogue is applied over the output afterwards.
bool conv2d_gemm_f32_applies(const StridedView& out, const StridedView& x, const StridedView& w,
                             const Conv2dParams& p);
// The frames part of it, on NCHW shapes (what a layout pass can know).
bool conv2d_frames_geometry(const int64_t* out, const int64_t* x, const int64_t* w,
                            const Conv2dParams& p);
void conv2d_gemm_f32(const StridedView& out, const StridedView& x, const StridedView& w,
                     const StridedView& bias, const Conv2dParams& p,
                     const ConvEpilogue& epilogue = {}, const StridedView& residual = {});
// The same with the filters packed once per `version` of w (a plan's).
struct GemmConvPack;
std::shared_ptr<GemmConvPack> make_gemm_conv_pack();
void conv2d_gemm_f32_packed(GemmConvPack& pack, uint64_t version, const StridedView& out,
                            const StridedView& x, const StridedView& w, const StridedView& bias,
                            const Conv2dParams& p, const ConvEpilogue& epilogue,
                            const StridedView& residual);
// A 1x1 convolution (groups 1, no padding) over a 1x1 image at batch 1, in
// either layout: matvec_f32 (conv_matvec.cpp; squeeze-excitation's FCs).
// The weight's rows must be contiguous; the epilogue runs over the output.
bool conv2d_matvec_f32_applies(const StridedView& out, const StridedView& x, const StridedView& w,
                               const Conv2dParams& p);
void conv2d_matvec_f32(const StridedView& out, const StridedView& x, const StridedView& w,
                       const StridedView& bias, const Conv2dParams& p,
                       const ConvEpilogue& epilogue = {}, const StridedView& residual = {});

// conv2d() followed by the epilogue: activation(conv + bias + residual),
// each path applying it its own way (oneDNN: post-ops). Eager calls of
// conv2d_fused; a Conv2dPlan made with the same epilogue gives the same bits.
void conv2d_fused(const StridedView& out, const StridedView& x, const StridedView& w,
                  const StridedView& bias, const StridedView& residual, const Conv2dParams& p,
                  const ConvEpilogue& epilogue);

// Whether a float32 convolution of this geometry (NCHW shapes: x [N, C, H,
// W], w, out) runs channels-last on oneDNN's kernels (groups 1, not one
// kiln's direct or column kernels take), and whether it pays to start a
// chain there: a spatial kernel over enough pixels, the convolutions that
// take oneDNN's blocked layouts on NCHW anyway. A convolution whose input
// is already channels-last joins whenever it runs so.
bool conv2d_channels_last_runs(const int64_t* out, const int64_t* x, const int64_t* w,
                               const Conv2dParams& p);
bool conv2d_channels_last_starts_chain(const int64_t* out, const int64_t* x, const int64_t* w,
                                       const Conv2dParams& p);

// The other implementations behind conv2d(), for tests that cross-check them.
void conv2d_onednn_f32(const StridedView& out, const StridedView& x, const StridedView& w,
                       const StridedView& bias, const Conv2dParams& p);
void conv2d_reference(const StridedView& out, const StridedView& x, const StridedView& w,
                      const StridedView& bias, const Conv2dParams& p);

// conv2d() for one fixed geometry (shapes, dtypes, bias or not, params),
// with the oneDNN primitive (and weight reorder) created up front, so run()
// skips the primitive cache. The constructor's views only lend their
// geometry; run() gives exactly what conv2d() gives for views of that
// geometry. run() may be called from several threads at once.
class Conv2dPlan {
 public:
  Conv2dPlan(const StridedView& out, const StridedView& x, const StridedView& w,
             const StridedView& bias, const Conv2dParams& p, const ConvEpilogue& epilogue = {});
  ~Conv2dPlan();
  Conv2dPlan(const Conv2dPlan&) = delete;
  Conv2dPlan& operator=(const Conv2dPlan&) = delete;

  // `residual`: the epilogue's, when the plan has one.
  void run(const StridedView& out, const StridedView& x, const StridedView& w,
           const StridedView& bias, const StridedView& residual = {}) const;

  // Whether the weights go into a layout of oneDNN's own (blocked, for
  // spatial kernels), which run() reorders them into on every call and
  // run_packed() once per `version` of the weight tensor: a plan whose
  // weights do not change between calls (frozen, or between optimizer
  // steps) keeps them packed. Same bits as run().
  bool packs_weights() const;

  // Asked once, before any run: true when the kernel the plan chose (kiln's
  // depthwise or direct one) applies relu as it stores, which run() then
  // does (conv2d_act with relu; the same bits as relu afterwards).
  bool take_relu();
  void run_packed(const StridedView& out, const StridedView& x, const StridedView& w,
                  const StridedView& bias, uint64_t version,
                  const StridedView& residual = {}) const;

 private:
  struct OneDnn;
  std::unique_ptr<const OneDnn> onednn_;  // null: nothing to do, our kernels, or the loop
  Conv2dParams params_;
  ConvEpilogue epilogue_;
  bool empty_;
  bool direct_ = false;
  bool depthwise_ = false;
  bool matvec_ = false;
  bool relu_ = false;
  bool column_ = false;                 // run as the same convolution along a row (conv.cpp)
  std::shared_ptr<GemmConvPack> gemm_;  // set: conv2d_gemm_f32

  void init(const StridedView& out, const StridedView& x, const StridedView& w,
            const StridedView& bias);
  void run_as_given(const StridedView& out, const StridedView& x, const StridedView& w,
                    const StridedView& bias, const StridedView& residual) const;
};

// conv2d's backward (conv_backward.cpp), with the forward's geometry:
// dx[N, C, H, W] (contiguous) from dy[N, OC, OH, OW] and w; dw[OC, C / groups,
// KH, KW] (contiguous) from dy and x[N, C, H, W]. oneDNN for float32, loops
// for float64; inputs may have any strides.
void conv2d_backward_input(const StridedView& dx, const StridedView& dy, const StridedView& w,
                           const Conv2dParams& p);
void conv2d_backward_weight(const StridedView& dw, const StridedView& dy, const StridedView& x,
                            const Conv2dParams& p);
// The loops behind them, for tests that cross-check.
void conv2d_backward_input_reference(const StridedView& dx, const StridedView& dy,
                                     const StridedView& w, const Conv2dParams& p);
void conv2d_backward_weight_reference(const StridedView& dw, const StridedView& dy,
                                      const StridedView& x, const Conv2dParams& p);

}  // namespace kiln::cpu
