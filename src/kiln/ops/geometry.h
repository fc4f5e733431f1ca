// Geometry that nn's functions (F.fold / F.unfold, F.affine_grid) and the
// ONNX importer (Col2Im, AffineGrid) share. The importer builds graphs and
// sits below nn, so what both need lives here, as numbers and constant
// tensors: the sliding blocks of im2col / col2im over any number of
// spatial dims, and the base grid of an affine grid.
#pragma once

#include <cstdint>
#include <string>

#include "kiln/core/tensor.h"

namespace kiln {

// The blocks a kernel slides over in an image padded by pads_begin /
// pads_end, one value per spatial dim in each list. PyTorch's im2col
// (aten/src/ATen/native/im2col.h) and ONNX's Col2Im agree on the layout:
// a column holds one kernel offset, offsets in row-major order, and a row
// of L = count() blocks, also in row-major order.
struct SlidingBlocks {
  IntList image, kernel, dilation, pads_begin, pads_end, stride;
  IntList padded;  // image + pads_begin + pads_end
  IntList blocks;  // blocks along each spatial dim

  int64_t count() const;          // L, the number of blocks
  int64_t kernel_volume() const;  // kernel offsets per block
  int64_t padded_volume() const;
  // int64 [kernel_volume() * count()]: the flat position in the padded
  // image of each (kernel offset, block), offsets outer.
  Tensor positions() const;
};

// Checks the sizes (each list as long as `image`, kernel, dilation and
// stride positive, pads non-negative, at least one block along each dim),
// naming `fn` in the error.
SlidingBlocks sliding_blocks(const IntList& image, const IntList& kernel, const IntList& dilation,
                             const IntList& pads_begin, const IntList& pads_end,
                             const IntList& stride, const std::string& fn);

// The homogeneous coordinates an affine grid transforms: a [prod(spatial),
// n + 1] tensor of `dtype` for n = spatial.size() (2 for (H, W), 3 for
// (D, H, W)), rows in row-major order over the spatial sizes, each row
// (x, y[, z], 1) with x along the last dim, in [-1, 1]: the corner pixels'
// centers with align_corners, their outer edges without (PyTorch's
// F.affine_grid, ONNX AffineGrid). With align_corners a dim of size 1 has
// no step between corners; its one coordinate is `unit_coordinate`
// (PyTorch takes 0).
Tensor affine_base_grid(const IntList& spatial, bool align_corners, DType dtype,
                        double unit_coordinate = 0.0);

}  // namespace kiln
