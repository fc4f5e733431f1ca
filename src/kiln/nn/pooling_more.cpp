// The pools of layers_more.h: the 1-d ones over the 2-d ops (a height of
// 1 changes nothing), the adaptive max pools as a max over gathered
// windows, LP pooling as PyTorch composes it, and fold / unfold as a
// scatter-add / gather of the padded input. PyTorch's reference:
// aten/src/ATen/native/{AdaptiveMaxPooling2d,Im2Col,Col2Im}.cpp and
// torch/nn/functional.py.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "kiln/core/factory.h"
#include "kiln/core/sym_shape.h"
#include "kiln/nn/layers_more.h"
#include "kiln/ops/conv_pool.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/geometry.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/resample.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/view.h"

namespace kiln::nn::functional {

namespace {

void check_pool1d_input(const Tensor& x, const char* fn) {
  KILN_CHECK(x.dim() == 2 || x.dim() == 3, fn, ": Expected 2D or 3D input tensor, but got ",
             x.shape());
}

// One value for the single spatial dim of a 1-d pool.
int64_t single(const IntList& values, const char* fn, const char* name) {
  KILN_CHECK(values.size() == 1, fn, ": ", name, " must be a single int, got ", values);
  return values[0];
}

// One value per spatial dim of a 2-d pool; one value means both.
std::array<int64_t, 2> two(const IntList& values, const char* fn, const char* name) {
  KILN_CHECK(values.size() == 1 || values.size() == 2, fn, ": ", name,
             " must be a single int or a pair of ints, got ", values);
  return {values[0], values.back()};
}

// The 1-d pool's arguments for the 2-d op: the height pooled by 1.
IntList with_unit_height(const IntList& values, const char* fn, const char* name, int64_t height) {
  return {height, single(values, fn, name)};
}

// x [..., L] -> [..., 1, L] and back.
Tensor add_height(const Tensor& x) {
  return unsqueeze(x, x.dim() - 1);
}
Tensor drop_height(const Tensor& x) {
  return squeeze(x, x.dim() - 2);
}

// PyTorch's adaptive windows over `in` positions: window o covers
// [floor(o in / out), ceil((o + 1) in / out)). Each is stored `width`
// positions wide, a short one repeating its last position: a repeat does
// not change a maximum, and the first occurrence still wins a tie.
struct Windows {
  std::vector<int64_t> positions;  // [out * width]
  int64_t out = 0, width = 0;
};

Windows adaptive_windows(int64_t in, int64_t out) {
  Windows w{{}, out, 0};
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = o * in / out, end = ((o + 1) * in + out - 1) / out;
    w.width = std::max(w.width, end - start);
  }
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = o * in / out, end = ((o + 1) * in + out - 1) / out;
    for (int64_t k = 0; k < w.width; ++k)
      w.positions.push_back(std::min(start + k, end - 1));
  }
  return w;
}

// x's dim `dim` becomes [out, width]: one window per row.
Tensor gather_windows(const Tensor& x, int64_t dim, const Windows& w) {
  Tensor picked = index_select(x, dim, tensor(w.positions, {int64_t(w.positions.size())}));
  DimList shape = sym_shape(picked);
  shape[size_t(dim)] = w.width;
  shape.insert(shape.begin() + dim, Dim(w.out));
  return reshape(picked, shape);
}

void check_adaptive_input(const Tensor& x, int64_t spatial, const IntList& output_size,
                          const char* fn) {
  KILN_CHECK(x.dim() == spatial + 1 || x.dim() == spatial + 2, fn, ": Expected ", spatial + 1,
             "D or ", spatial + 2, "D tensor, but got: ", x.shape());
  for (int64_t d = 1; d < x.dim(); ++d) {
    KILN_CHECK(x.size(d) > 0, fn,
               ": Expected input to have non-zero size for non-batch dimensions, but input has "
               "sizes ",
               x.shape(), " with dimension ", d, " being empty");
  }
  for (int64_t size : output_size) {
    KILN_CHECK(size > 0, fn, ": output_size must be positive, got ", output_size);
  }
}

// The maximum over the last dim of `windows` ([..., outputs..., slots]) and
// the input position it came from: `positions` holds one row of `slots`
// window positions per output, read at the winning slot.
std::tuple<Tensor, Tensor> max_with_positions(const Tensor& windows,
                                              const std::vector<int64_t>& positions, int64_t slots,
                                              const IntList& output_dims) {
  auto [values, slot] = max(windows, windows.dim() - 1);
  const int64_t outputs = int64_t(positions.size()) / slots;
  Tensor row_start = reshape(arange(int64_t(0), outputs * slots, slots), output_dims);
  Tensor table = tensor(positions, {int64_t(positions.size())});
  Tensor indices = reshape(index_select(table, 0, flatten(slot + row_start)), sym_shape(slot));
  return {values, indices};
}

}  // namespace

Tensor max_pool1d(const Tensor& x, IntList kernel_size, IntList stride, IntList padding,
                  IntList dilation, bool ceil_mode) {
  check_pool1d_input(x, "max_pool1d");
  IntList stride2d =
      stride.empty() ? IntList{} : with_unit_height(stride, "max_pool1d", "stride", 1);
  return drop_height(
      max_pool2d(add_height(x), with_unit_height(kernel_size, "max_pool1d", "kernel_size", 1),
                 stride2d, with_unit_height(padding, "max_pool1d", "padding", 0),
                 with_unit_height(dilation, "max_pool1d", "dilation", 1), ceil_mode));
}

Tensor avg_pool1d(const Tensor& x, IntList kernel_size, IntList stride, IntList padding,
                  bool ceil_mode, bool count_include_pad) {
  check_pool1d_input(x, "avg_pool1d");
  IntList stride2d =
      stride.empty() ? IntList{} : with_unit_height(stride, "avg_pool1d", "stride", 1);
  return drop_height(avg_pool2d(
      add_height(x), with_unit_height(kernel_size, "avg_pool1d", "kernel_size", 1), stride2d,
      with_unit_height(padding, "avg_pool1d", "padding", 0), ceil_mode, count_include_pad));
}

Tensor adaptive_avg_pool1d(const Tensor& x, IntList output_size) {
  check_pool1d_input(x, "adaptive_avg_pool1d");
  return drop_height(adaptive_avg_pool2d(
      add_height(x), with_unit_height(output_size, "adaptive_avg_pool1d", "output_size", 1)));
}

std::tuple<Tensor, Tensor> adaptive_max_pool1d_with_indices(const Tensor& x, IntList output_size) {
  const int64_t out = single(output_size, "adaptive_max_pool1d", "output_size");
  check_adaptive_input(x, 1, output_size, "adaptive_max_pool1d");
  const int64_t length = size_as_int(sym_size(x, -1), "adaptive_max_pool1d's input length");
  const Windows w = adaptive_windows(length, out);
  Tensor windows = gather_windows(x, x.dim() - 1, w);  // [..., out, width]
  return max_with_positions(windows, w.positions, w.width, {out});
}

std::tuple<Tensor, Tensor> adaptive_max_pool2d_with_indices(const Tensor& x, IntList output_size) {
  auto [out_h, out_w] = two(output_size, "adaptive_max_pool2d", "output_size");
  check_adaptive_input(x, 2, output_size, "adaptive_max_pool2d");
  const int64_t height = size_as_int(sym_size(x, -2), "adaptive_max_pool2d's input height");
  const int64_t width = size_as_int(sym_size(x, -1), "adaptive_max_pool2d's input width");
  const Windows rows = adaptive_windows(height, out_h), cols = adaptive_windows(width, out_w);
  // [..., H, W] -> [..., oh, kh, W] -> [..., oh, kh, ow, kw] -> [..., oh, ow, kh * kw]
  const int64_t lead = x.dim() - 2;
  Tensor windows = gather_windows(gather_windows(x, lead, rows), lead + 2, cols);
  windows = transpose(windows, lead + 1, lead + 2);
  DimList shape = sym_shape(windows);
  shape.resize(size_t(lead + 2));
  shape.push_back(Dim(rows.width * cols.width));
  windows = reshape(windows, shape);
  // The flat input position (h W + w) of every slot of every window.
  std::vector<int64_t> positions;
  for (int64_t oh = 0; oh < out_h; ++oh) {
    for (int64_t ow = 0; ow < out_w; ++ow) {
      for (int64_t kh = 0; kh < rows.width; ++kh) {
        for (int64_t kw = 0; kw < cols.width; ++kw) {
          positions.push_back(rows.positions[size_t(oh * rows.width + kh)] * width +
                              cols.positions[size_t(ow * cols.width + kw)]);
        }
      }
    }
  }
  return max_with_positions(windows, positions, rows.width * cols.width, {out_h, out_w});
}

namespace {

// PyTorch's lp_pool1d / lp_pool2d: the average of x^p times the window
// size, the sign kept out of the root; +-inf norms are max pools of |x|.
template <typename AvgPool, typename MaxPool>
Tensor lp_pool(const Tensor& x, double norm_type, int64_t window, AvgPool avg, MaxPool max_pool) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (norm_type == kInf) return max_pool(abs(x));
  if (norm_type == -kInf) return -max_pool(-abs(x));
  Tensor out = avg(pow(x, norm_type));
  return pow(sign(out) * relu(abs(out)) * double(window), 1.0 / norm_type);
}

}  // namespace

Tensor lp_pool1d(const Tensor& x, double norm_type, IntList kernel_size, IntList stride,
                 bool ceil_mode) {
  const int64_t k = single(kernel_size, "lp_pool1d", "kernel_size");
  return lp_pool(
      x, norm_type, k,
      [&](const Tensor& t) { return avg_pool1d(t, kernel_size, stride, {0}, ceil_mode); },
      [&](const Tensor& t) { return max_pool1d(t, kernel_size, stride, {0}, {1}, ceil_mode); });
}

Tensor lp_pool2d(const Tensor& x, double norm_type, IntList kernel_size, IntList stride,
                 bool ceil_mode) {
  auto [kh, kw] = two(kernel_size, "lp_pool2d", "kernel_size");
  return lp_pool(
      x, norm_type, kh * kw,
      [&](const Tensor& t) { return avg_pool2d(t, kernel_size, stride, {0}, ceil_mode); },
      [&](const Tensor& t) { return max_pool2d(t, kernel_size, stride, {0}, {1}, ceil_mode); });
}

// ---- fold / unfold ------------------------------------------------------------

namespace {

// The sliding blocks over a (height, width) plane, padded alike on both
// sides (geometry.h, which ONNX's N-D Col2Im shares).
SlidingBlocks blocks_over(int64_t height, int64_t width, const IntList& kernel_size,
                          const IntList& dilation, const IntList& padding, const IntList& stride,
                          const char* fn) {
  auto pair = [fn](const IntList& values, const char* name) {
    auto [first, second] = two(values, fn, name);
    return IntList{first, second};
  };
  const IntList pads = pair(padding, "padding");
  return sliding_blocks({height, width}, pair(kernel_size, "kernel_size"),
                        pair(dilation, "dilation"), pads, pads, pair(stride, "stride"), fn);
}

}  // namespace

Tensor unfold(const Tensor& x, IntList kernel_size, IntList dilation, IntList padding,
              IntList stride) {
  KILN_CHECK(x.dim() == 3 || x.dim() == 4,
             "unfold: Expected 3D or 4D (batch mode) tensor for input, but got: ", x.shape());
  const bool batched = x.dim() == 4;
  Tensor input = batched ? x : unsqueeze(x, 0);
  const int64_t height = size_as_int(sym_size(input, 2), "unfold's input height");
  const int64_t width = size_as_int(sym_size(input, 3), "unfold's input width");
  const SlidingBlocks b =
      blocks_over(height, width, kernel_size, dilation, padding, stride, "unfold");
  if (b.pads_begin[0] > 0 || b.pads_begin[1] > 0) {
    input = pad(input, {b.pads_begin[1], b.pads_end[1], b.pads_begin[0], b.pads_end[0]});
  }
  const DimList shape = sym_shape(input);
  Tensor plane = reshape(input, DimList{shape[0], shape[1], b.padded_volume()});
  Tensor columns = index_select(plane, 2, b.positions());  // [N, C, kh kw L]
  Tensor out = reshape(columns, DimList{shape[0], shape[1] * b.kernel_volume(), b.count()});
  return batched ? out : squeeze(out, 0);
}

Tensor fold(const Tensor& x, IntList output_size, IntList kernel_size, IntList dilation,
            IntList padding, IntList stride) {
  KILN_CHECK(x.dim() == 2 || x.dim() == 3,
             "fold: Expected 2D or 3D (batch mode) tensor for input, but got: ", x.shape());
  const bool batched = x.dim() == 3;
  Tensor input = batched ? x : unsqueeze(x, 0);
  auto [height, width] = two(output_size, "fold", "output_size");
  const SlidingBlocks b =
      blocks_over(height, width, kernel_size, dilation, padding, stride, "fold");
  const int64_t rows = input.size(1);
  KILN_CHECK(rows % b.kernel_volume() == 0,
             "fold: Expected size of input's dimension 1 to be divisible by the product of "
             "kernel_size, but got input.size(1)=",
             rows, " and kernel_size=", kernel_size);
  KILN_CHECK(input.size(2) == b.count(), "fold: Given output_size=", output_size,
             ", kernel_size=", kernel_size, ", dilation=", dilation, ", padding=", padding,
             ", stride=", stride,
             ", expected size of input's dimension 2 to match the calculated number of sliding "
             "blocks ",
             b.blocks[0], " * ", b.blocks[1], " = ", b.count(),
             ", but got input.size(2)=", input.size(2), ".");
  const DimList shape = sym_shape(input);
  const Dim channels = floordiv(shape[1], b.kernel_volume());
  Tensor columns = reshape(input, DimList{shape[0], channels, b.kernel_volume() * b.count()});
  Tensor zeros_plane =
      expand(zeros({1, 1, 1}, x.dtype()), DimList{shape[0], channels, b.padded_volume()});
  Tensor plane = index_add(zeros_plane, 2, b.positions(), columns);
  Tensor image = reshape(plane, DimList{shape[0], channels, b.padded[0], b.padded[1]});
  image = narrow(narrow(image, 2, b.pads_begin[0], height), 3, b.pads_begin[1], width);
  return batched ? image : squeeze(image, 0);
}

}  // namespace kiln::nn::functional
