// Resampling and padding layers: F.interpolate (nearest, nearest-exact,
// linear, bilinear, bicubic) and Upsample, F.pad, F.pixel_shuffle / pixel_unshuffle
// and their modules, with PyTorch's arguments, defaults and checks.
// interpolate and pad are the ops of ops/resample.h (a 3-D input runs the
// 2-D op over a height of 1); pixel (un)shuffle is a reshape, a permute and
// a reshape, so a trace or an ONNX export sees those.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kiln/nn/module.h"
#include "kiln/ops/resample.h"

namespace kiln::nn {
namespace functional {

using kiln::pad;

struct InterpolateOptions {
  // Exactly one of size and scale_factor, with one entry per spatial dim
  // (PyTorch's single number is that number repeated).
  std::optional<IntList> size = std::nullopt;
  std::optional<std::vector<double>> scale_factor = std::nullopt;
  // "nearest", "nearest-exact", "linear" (3-D), "bilinear" or "bicubic" (4-D)
  std::string mode = "nearest";
  std::optional<bool> align_corners = std::nullopt;  // linear modes only; default false
  // true: the output size is computed from scale_factor, then the sizes alone
  // decide the source indices (as if size had been given).
  std::optional<bool> recompute_scale_factor = std::nullopt;
  bool antialias = false;  // not supported: an error when set
};
// x is [N, C, L] or [N, C, H, W].
Tensor interpolate(const Tensor& x, const InterpolateOptions& options);

// [*, C * r * r, H, W] -> [*, C, H * r, W * r], and back.
Tensor pixel_shuffle(const Tensor& x, int64_t upscale_factor);
Tensor pixel_unshuffle(const Tensor& x, int64_t downscale_factor);

}  // namespace functional

// F.interpolate as a module. PyTorch's Upsample stores a scale factor as a
// float; mode "nearest" by default.
class Upsample : public Module {
 public:
  explicit Upsample(functional::InterpolateOptions options);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  functional::InterpolateOptions options;
};

class PixelShuffle : public Module {
 public:
  explicit PixelShuffle(int64_t upscale_factor)
      : Module("PixelShuffle"), upscale_factor(upscale_factor) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  int64_t upscale_factor;
};

class PixelUnshuffle : public Module {
 public:
  explicit PixelUnshuffle(int64_t downscale_factor)
      : Module("PixelUnshuffle"), downscale_factor(downscale_factor) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  int64_t downscale_factor;
};

}  // namespace kiln::nn
