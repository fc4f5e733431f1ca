// The sliding blocks of im2col / col2im and the base grid of an affine
// grid (geometry.h), computed once as numbers for F.fold / F.unfold /
// F.affine_grid and ONNX's Col2Im / AffineGrid.
#include "kiln/ops/geometry.h"

#include <vector>

#include "kiln/core/factory.h"
#include "kiln/util/error.h"

namespace kiln {

namespace {

int64_t product(const IntList& values) {
  int64_t total = 1;
  for (int64_t v : values)
    total *= v;
  return total;
}

// The coordinate of `index` of `size` points along one dim.
double grid_coordinate(int64_t index, int64_t size, bool align_corners, double unit_coordinate) {
  if (align_corners) {
    if (size == 1) return unit_coordinate;
    return -1.0 + 2.0 * double(index) / double(size - 1);
  }
  return (2.0 * double(index) + 1.0) / double(size) - 1.0;  // pixel centers, edges at +-1
}

}  // namespace

int64_t SlidingBlocks::count() const {
  return product(blocks);
}
int64_t SlidingBlocks::kernel_volume() const {
  return product(kernel);
}
int64_t SlidingBlocks::padded_volume() const {
  return product(padded);
}

Tensor SlidingBlocks::positions() const {
  const size_t dims = image.size();
  std::vector<int64_t> out;
  out.reserve(size_t(kernel_volume() * count()));
  IntList offset(dims, 0);  // the kernel offset, counted row-major
  for (int64_t k = 0; k < kernel_volume(); ++k) {
    IntList block(dims, 0);  // the block, counted row-major
    for (int64_t b = 0; b < count(); ++b) {
      int64_t flat = 0;
      for (size_t d = 0; d < dims; ++d)
        flat = flat * padded[d] + block[d] * stride[d] + offset[d] * dilation[d];
      out.push_back(flat);
      for (size_t d = dims; d-- > 0 && ++block[d] == blocks[d];)
        block[d] = 0;
    }
    for (size_t d = dims; d-- > 0 && ++offset[d] == kernel[d];)
      offset[d] = 0;
  }
  return tensor_from_data(out.data(), DType::Int64, {int64_t(out.size())}, DType::Int64);
}

SlidingBlocks sliding_blocks(const IntList& image, const IntList& kernel, const IntList& dilation,
                             const IntList& pads_begin, const IntList& pads_end,
                             const IntList& stride, const std::string& fn) {
  const size_t dims = image.size();
  for (const IntList* list : {&kernel, &dilation, &pads_begin, &pads_end, &stride})
    KILN_CHECK(list->size() == dims, fn, ": expected one value per spatial dim of the image ",
               image, " in kernel_size ", kernel, ", dilation ", dilation, ", padding ", pads_begin,
               " / ", pads_end, " and stride ", stride);
  SlidingBlocks b{image, kernel, dilation, pads_begin, pads_end, stride, {}, {}};
  for (size_t d = 0; d < dims; ++d) {
    KILN_CHECK(kernel[d] > 0, fn, ": kernel size should be greater than zero, but got ", kernel);
    KILN_CHECK(dilation[d] > 0, fn, ": dilation should be greater than zero, but got ", dilation);
    KILN_CHECK(pads_begin[d] >= 0 && pads_end[d] >= 0, fn,
               ": padding should be non-negative, but got ", pads_begin, " / ", pads_end);
    KILN_CHECK(stride[d] > 0, fn, ": stride should be greater than zero, but got ", stride);
    // Sizes past int64 would wrap (a kernel volume of 0 divides by zero).
    int64_t padded = 0, span = 0;
    KILN_CHECK(!__builtin_add_overflow(image[d], pads_begin[d], &padded) &&
                   !__builtin_add_overflow(padded, pads_end[d], &padded) &&
                   !__builtin_mul_overflow(dilation[d], kernel[d] - 1, &span) &&
                   !__builtin_add_overflow(span, 1, &span),
               fn, ": sizes too large: image ", image, ", kernel_size ", kernel, ", dilation ",
               dilation, ", padding ", pads_begin, " / ", pads_end);
    b.padded.push_back(padded);
    b.blocks.push_back(padded >= span ? (padded - span) / stride[d] + 1 : 0);
  }
  for (size_t d = 0; d < dims; ++d)
    KILN_CHECK(b.blocks[d] >= 1, fn, ": given an image of spatial size ", image, ", kernel_size ",
               kernel, ", dilation ", dilation, ", padding ", pads_begin, " / ", pads_end,
               " and stride ", stride, ", calculated shape of the array of sliding blocks as ",
               b.blocks, ", but its components must be at least one");
  // Every size is now at least 1, so a product that fits is exact; positions()
  // holds kernel_volume() * count() entries.
  int64_t total = 1;
  for (const IntList* list : {&b.kernel, &b.blocks})
    for (int64_t v : *list)
      KILN_CHECK(!__builtin_mul_overflow(total, v, &total), fn, ": sizes too large: kernel_size ",
                 kernel, " over ", b.blocks, " sliding blocks makes more than 2^63 column entries");
  int64_t volume = 1;
  for (int64_t v : b.padded)
    KILN_CHECK(!__builtin_mul_overflow(volume, v, &volume), fn,
               ": sizes too large: the padded image ", b.padded, " has more than 2^63 elements");
  return b;
}

Tensor affine_base_grid(const IntList& spatial, bool align_corners, DType dtype,
                        double unit_coordinate) {
  const size_t dims = spatial.size();
  for (int64_t size : spatial)
    KILN_CHECK_VALUE(size > 0, "affine_grid: expected positive spatial sizes, but got ", spatial);
  const int64_t points = product(spatial);
  std::vector<double> rows;
  rows.reserve(size_t(points) * (dims + 1));
  IntList at(dims, 0);  // the point, counted row-major
  for (int64_t p = 0; p < points; ++p) {
    for (size_t d = dims; d-- > 0;)  // x (the last dim) first
      rows.push_back(grid_coordinate(at[d], spatial[d], align_corners, unit_coordinate));
    rows.push_back(1.0);
    for (size_t d = dims; d-- > 0 && ++at[d] == spatial[d];)
      at[d] = 0;
  }
  return tensor_from_data(rows.data(), DType::Float64, {points, int64_t(dims + 1)}, dtype);
}

}  // namespace kiln
