#include "kiln/kernels/cpu/reduce_geometry.h"

#include "kiln/util/error.h"

namespace kiln::cpu {
namespace {

// Merges dim i + 1 into dim i wherever dim i steps over exactly one full
// sweep of dim i + 1 in every stride set, so row-major order is unchanged.
template <int N>
int merge_dims(int ndim, int64_t* shape, std::array<int64_t*, N> strides) {
  int kept = 0;
  for (int d = 0; d < ndim; ++d) {
    bool merge = kept > 0;
    for (int k = 0; k < N && merge; ++k) {
      merge = strides[k][kept - 1] == strides[k][d] * shape[d];
    }
    if (merge) {
      shape[kept - 1] *= shape[d];
      for (int k = 0; k < N; ++k)
        strides[k][kept - 1] = strides[k][d];
      continue;
    }
    shape[kept] = shape[d];
    for (int k = 0; k < N; ++k)
      strides[k][kept] = strides[k][d];
    ++kept;
  }
  return kept;
}

}  // namespace

ReduceGeometry make_reduce_geometry(const StridedView& out, const StridedView& in, DimMask mask) {
  ReduceGeometry g;
  int num_kept = 0;
  for (int d = 0; d < in.ndim; ++d)
    num_kept += is_reduced(mask, d) ? 0 : 1;
  const bool keepdim_layout = out.ndim == in.ndim;
  KILN_ASSERT(keepdim_layout || out.ndim == num_kept, "reduction output has ", out.ndim,
              " dims for an input of ", in.ndim, " dims with ", num_kept, " kept");
  int out_dim = 0;
  for (int d = 0; d < in.ndim; ++d) {
    const int64_t size = in.shape[d];
    if (is_reduced(mask, d)) {
      g.reduce_len *= size;
      if (size == 1) continue;  // size-1 dims add nothing to the walk
      g.red_shape[g.red_ndim] = size;
      g.red_in[g.red_ndim++] = in.strides[d];
      continue;
    }
    const int64_t out_stride = out.strides[keepdim_layout ? d : out_dim];
    ++out_dim;
    g.num_outputs *= size;
    if (size == 1) continue;
    g.kept_shape[g.kept_ndim] = size;
    g.kept_in[g.kept_ndim] = in.strides[d];
    g.kept_out[g.kept_ndim++] = out_stride;
  }
  g.kept_ndim = merge_dims<2>(g.kept_ndim, g.kept_shape, {g.kept_in, g.kept_out});
  g.red_ndim = merge_dims<1>(g.red_ndim, g.red_shape, {g.red_in});
  return g;
}

}  // namespace kiln::cpu
