#include "kiln/nn/resample_layers.h"

#include <charconv>
#include <cmath>

#include "kiln/core/factory.h"
#include "kiln/core/sym_shape.h"
#include "kiln/ops/view.h"

namespace kiln::nn {
namespace functional {
namespace {

bool is_known_mode(const std::string& mode) {
  for (const char* known :
       {"nearest", "linear", "bilinear", "bicubic", "trilinear", "area", "nearest-exact"}) {
    if (mode == known) return true;
  }
  return false;
}

// floor(size * scale), PyTorch's output size for a scale factor. A symbolic
// size stays symbolic when the scale is a whole number or one over one;
// otherwise the trace is specialized to the size of the call being traced.
Dim scaled_size(const Dim& size, double scale) {
  if (size.is_static()) return int64_t(double(size.static_value()) * scale);
  if (scale >= 1.0 && scale == std::floor(scale)) return size * int64_t(scale);
  const double inverse = 1.0 / scale;
  if (scale > 0.0 && inverse == std::floor(inverse) && inverse * scale == 1.0) {
    return floordiv(size, int64_t(inverse));
  }
  return int64_t(double(size_as_int(size, "interpolate's output size")) * scale);
}

void check_mode_and_rank(const Tensor& x, const std::string& mode) {
  KILN_CHECK_KIND(ErrorKind::NotImplemented, x.dim() >= 3 && x.dim() <= 5 && is_known_mode(mode),
                  "interpolate: input Error: only 3D, 4D and 5D input tensors supported (got ",
                  x.dim(),
                  "D) for the modes: nearest | linear | bilinear | bicubic | trilinear | area | "
                  "nearest-exact (got ",
                  mode, ")");
  KILN_CHECK_KIND(
      ErrorKind::NotImplemented,
      mode == "nearest" || mode == "nearest-exact" || mode == "linear" || mode == "bilinear" ||
          mode == "bicubic",
      "interpolate: mode '", mode,
      "' is not supported (kiln has nearest, nearest-exact, linear, bilinear and bicubic)");
  KILN_CHECK_KIND(ErrorKind::NotImplemented, mode != "bicubic" || x.dim() == 4, "interpolate: got ",
                  x.dim(), "D input, but bicubic mode needs 4D input");
  KILN_CHECK_KIND(ErrorKind::NotImplemented, mode != "bilinear" || x.dim() == 4,
                  "interpolate: got ", x.dim(), "D input, but bilinear mode needs 4D input");
  KILN_CHECK_KIND(ErrorKind::NotImplemented, mode != "linear" || x.dim() == 3, "interpolate: got ",
                  x.dim(), "D input, but linear mode needs 3D input");
  KILN_CHECK_KIND(ErrorKind::NotImplemented, x.dim() != 5,
                  "interpolate: 5D input (3 spatial dims) is not supported for mode ", mode);
}

IntList spatial_shape(const Tensor& x) {
  return IntList(x.shape().begin() + 2, x.shape().end());
}

// PyTorch's bicubic (A = -0.75; indices clamped at the borders) is ONNX's
// cubic resize: align_corners, or half_pixel with the scale factors where
// given. Equal sizes copy (PyTorch's shortcut), whatever the scale factor.
Tensor bicubic(const Tensor& x, const DimList& size, bool align_corners,
               const std::vector<std::optional<double>>& scales) {
  const DimList in = sym_shape(x);
  const DimList out = {in[0], in[1], size[0], size[1]};
  const bool same = in[2] == size[0] && in[3] == size[1];
  Tensor scale_values;
  if (!align_corners && !same && scales[0] && scales[1]) {
    scale_values = empty({4}, DType::Float64);
    double* s = scale_values.data<double>();
    s[0] = s[1] = 1.0;
    s[2] = *scales[0];
    s[3] = *scales[1];
  }
  ResizeOptions options;
  options.mode = "cubic";
  options.coordinate_transformation_mode = align_corners ? "align_corners" : "half_pixel";
  return resize(x, out, Tensor(), scale_values, options);
}

}  // namespace

Tensor interpolate(const Tensor& x, const InterpolateOptions& o) {
  const std::string& mode = o.mode;
  const bool nearest = mode == "nearest" || mode == "nearest-exact" || mode == "area";
  KILN_CHECK_VALUE(!nearest || !o.align_corners,
                   "interpolate: align_corners option can only be set with the interpolating "
                   "modes: linear | bilinear | bicubic | trilinear");
  check_mode_and_rank(x, mode);
  const size_t dims = size_t(x.dim() - 2);
  KILN_CHECK_VALUE(!(o.size && o.scale_factor),
                   "interpolate: only one of size or scale_factor should be defined");
  KILN_CHECK_VALUE(o.size || o.scale_factor,
                   "interpolate: either size or scale_factor should be defined");
  KILN_CHECK_VALUE(!o.size || o.size->size() == dims,
                   "interpolate: input and output must have the same number of spatial "
                   "dimensions, but got input with spatial dimensions of ",
                   spatial_shape(x), " and output size of ", o.size.value_or(IntList{}));
  KILN_CHECK_VALUE(!o.scale_factor || o.scale_factor->size() == dims,
                   "interpolate: input and scale_factor must have the same number of spatial "
                   "dimensions, but got input with spatial dimensions of ",
                   spatial_shape(x), " and scale_factor of ",
                   o.scale_factor ? o.scale_factor->size() : 0, " values");
  const bool recompute = o.recompute_scale_factor.value_or(false);
  KILN_CHECK_VALUE(!(recompute && o.size),
                   "interpolate: recompute_scale_factor is not meaningful with an explicit size");
  KILN_CHECK_KIND(ErrorKind::NotImplemented, !o.antialias,
                  "interpolate: antialias=True is not supported");

  DimList size;
  std::vector<std::optional<double>> scales(dims);
  for (size_t i = 0; i < dims; ++i) {
    if (o.size) {
      size.push_back((*o.size)[i]);
      continue;
    }
    const double scale = (*o.scale_factor)[i];
    size.push_back(scaled_size(sym_size(x, int64_t(2 + i)), scale));
    if (!recompute) scales[i] = scale;
  }
  if (mode == "bicubic") return bicubic(x, size, o.align_corners.value_or(false), scales);
  // A 3-D input is a 4-D one of height 1, which both modes map to itself.
  const bool one_d = dims == 1;
  const Tensor input = one_d ? unsqueeze(x, 2) : x;
  const DimList size2 = one_d ? DimList{1, size[0]} : size;
  const std::optional<double> scales_h = one_d ? std::nullopt : scales[0];
  const Tensor y =
      mode == "nearest" || mode == "nearest-exact"
          ? upsample_nearest2d(input, size2, scales_h, scales.back(), mode == "nearest-exact")
          : upsample_bilinear2d(input, size2, o.align_corners.value_or(false), scales_h,
                                scales.back());
  return one_d ? squeeze(y, 2) : y;
}

Tensor pixel_shuffle(const Tensor& x, int64_t r) {
  KILN_CHECK(x.dim() >= 3,
             "pixel_shuffle: expects input to have at least 3 dimensions, but got "
             "input with ",
             x.dim(), " dimension(s)");
  KILN_CHECK(r > 0, "pixel_shuffle: expects a positive upscale_factor, but got ", r);
  const int64_t channels = x.shape()[size_t(x.dim() - 3)];
  KILN_CHECK(channels % (r * r) == 0,
             "pixel_shuffle: expects its input's 'channel' dimension to be divisible by the "
             "square of upscale_factor, but input.size(-3)=",
             channels, " is not divisible by ", r * r);
  const DimList s = sym_shape(x);
  const size_t lead = s.size() - 3;
  const Dim &H = s[lead + 1], &W = s[lead + 2];
  DimList split(s.begin(), s.begin() + int64_t(lead)), merged = split;
  for (const Dim& d : {Dim(channels / (r * r)), Dim(r), Dim(r), H, W})
    split.push_back(d);
  for (const Dim& d : {Dim(channels / (r * r)), H * r, W * r})
    merged.push_back(d);
  IntList order;
  for (size_t d = 0; d < lead; ++d)
    order.push_back(int64_t(d));
  // [*, C, r, r, H, W] -> [*, C, H, r, W, r]
  for (size_t d : {0, 3, 1, 4, 2})
    order.push_back(int64_t(lead + d));
  return reshape(permute(reshape(x, split), order), merged);
}

Tensor pixel_unshuffle(const Tensor& x, int64_t r) {
  KILN_CHECK(x.dim() >= 3,
             "pixel_unshuffle: expects input to have at least 3 dimensions, but "
             "got input with ",
             x.dim(), " dimension(s)");
  KILN_CHECK(r > 0, "pixel_unshuffle: expects a positive downscale_factor, but got ", r);
  const int64_t height = x.shape()[size_t(x.dim() - 2)], width = x.shape().back();
  KILN_CHECK(height % r == 0,
             "pixel_unshuffle: expects height to be divisible by downscale_factor, but "
             "input.size(-2)=",
             height, " is not divisible by ", r);
  KILN_CHECK(width % r == 0,
             "pixel_unshuffle: expects width to be divisible by downscale_factor, but "
             "input.size(-1)=",
             width, " is not divisible by ", r);
  const DimList s = sym_shape(x);
  const size_t lead = s.size() - 3;
  const Dim& C = s[lead];
  const Dim H = floordiv(s[lead + 1], r), W = floordiv(s[lead + 2], r);
  DimList split(s.begin(), s.begin() + int64_t(lead)), merged = split;
  for (const Dim& d : {C, H, Dim(r), W, Dim(r)})
    split.push_back(d);
  for (const Dim& d : {C * (r * r), H, W})
    merged.push_back(d);
  IntList order;
  for (size_t d = 0; d < lead; ++d)
    order.push_back(int64_t(d));
  // [*, C, H, r, W, r] -> [*, C, r, r, H, W]
  for (size_t d : {0, 2, 4, 1, 3})
    order.push_back(int64_t(lead + d));
  return reshape(permute(reshape(x, split), order), merged);
}

}  // namespace functional

namespace {

// Python's repr of a float: the shortest form that reads back, with ".0"
// on a whole number.
std::string py_float(double v) {
  char buffer[64];
  auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, v);
  std::string out(buffer, end);
  if (out.find_first_of(".en") == std::string::npos) out += ".0";
  return out;
}

template <typename T, typename Format>
std::string py_values(const std::vector<T>& values, Format format) {
  if (values.size() == 1) return format(values[0]);
  std::string out = "(";
  for (size_t i = 0; i < values.size(); ++i)
    out += (i ? ", " : "") + format(values[i]);
  return out + ")";
}

}  // namespace

Upsample::Upsample(functional::InterpolateOptions options)
    : Module("Upsample"), options(std::move(options)) {}

Tensor Upsample::forward(const Tensor& x) {
  return functional::interpolate(x, options);
}

std::string Upsample::extra_repr() const {
  std::string info = options.scale_factor
                         ? "scale_factor=" + py_values(*options.scale_factor, py_float)
                         : "size=" + py_values(options.size.value_or(IntList{}),
                                               [](int64_t v) { return std::to_string(v); });
  return info + ", mode='" + options.mode + "'";
}

Tensor PixelShuffle::forward(const Tensor& x) {
  return functional::pixel_shuffle(x, upscale_factor);
}

std::string PixelShuffle::extra_repr() const {
  return str("upscale_factor=", upscale_factor);
}

Tensor PixelUnshuffle::forward(const Tensor& x) {
  return functional::pixel_unshuffle(x, downscale_factor);
}

std::string PixelUnshuffle::extra_repr() const {
  return str("downscale_factor=", downscale_factor);
}

}  // namespace kiln::nn
