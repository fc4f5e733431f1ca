// F.affine_grid as PyTorch computes it (torch/nn/functional.py,
// aten/src/ATen/native/AffineGridGenerator.cpp): the base grid of
// homogeneous coordinates times each theta^T, one matmul.
#include <algorithm>

#include "kiln/nn/layers_more.h"
#include "kiln/ops/geometry.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/view.h"

namespace kiln::nn::functional {

Tensor affine_grid(const Tensor& theta, IntList size, bool align_corners) {
  KILN_CHECK_VALUE(is_floating(theta.dtype()),
                   "affine_grid: expected theta to have floating point type, but got ",
                   theta.dtype());
  KILN_CHECK_VALUE(size.size() == 4 || size.size() == 5,
                   "affine_grid: only 2D (size N, C, H, W) and 3D (size N, C, D, H, W) affine "
                   "grids are supported, but got size ",
                   size);
  KILN_CHECK_VALUE(std::all_of(size.begin(), size.end(), [](int64_t s) { return s > 0; }),
                   "affine_grid: expected non-zero, positive output size, but got ", size);
  const int64_t dims = int64_t(size.size()) - 2;
  KILN_CHECK_VALUE(theta.dim() == 3 && theta.size(1) == dims && theta.size(2) == dims + 1,
                   "affine_grid: expected a batch of ", dims, "D affine matrices of shape Nx", dims,
                   "x", dims + 1, " for size ", size, ", but got theta of shape ", theta.shape());
  KILN_CHECK(theta.size(0) == size[0], "affine_grid: theta holds ", theta.size(0),
             " matrices for a batch of size[0] = ", size[0]);
  const IntList spatial(size.begin() + 2, size.end());
  Tensor base = affine_base_grid(spatial, align_corners, theta.dtype());  // [S, dims + 1]
  Tensor grid = matmul(base, transpose(theta, 1, 2));                     // [N, S, dims]
  IntList shape = {size[0]};
  shape.insert(shape.end(), spatial.begin(), spatial.end());
  shape.push_back(dims);
  return reshape(grid, shape);
}

}  // namespace kiln::nn::functional
