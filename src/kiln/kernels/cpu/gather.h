// Indexing kernels: index_select, gather, embedding, one_hot, and the
// accumulating writes index_add and scatter_add. Index tensors
// are int32 or int64 (one_hot: int64). Indices are checked against the
// indexed size as they are read, so a bad index throws kiln::Error (IndexError)
// naming its value; the loops run on one thread so a throw is safe.
#pragma once

#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

// out = in with `dim` picked at index[0], index[1], ... (index is 1-D or 0-d).
// A 0-d `in` is indexed as if it had one dim of size 1.
void index_select(const StridedView& out, const StridedView& in, const StridedView& index, int dim);
// out[i][j][k] = in[index[i][j][k]][j][k] for dim 0 (and so on); out has
// index's shape.
void gather(const StridedView& out, const StridedView& in, const StridedView& index, int dim);
// out = self, then out[index[i][j]][j] += src[i][j] for dim 0 (and so on)
// over every position of index; src and out have self's dtype.
void scatter_add(const StridedView& out, const StridedView& self, const StridedView& index,
                 const StridedView& src, int dim);
// out = self, then out.select(dim, index[i]) += src.select(dim, i); index is
// 1-D or 0-d; a 0-d self counts as one dim of size 1.
void index_add(const StridedView& out, const StridedView& self, const StridedView& index,
               const StridedView& src, int dim);
// out[..., :] = weight[indices[...], :]; weight is 2-D.
void embedding(const StridedView& out, const StridedView& weight, const StridedView& indices);
// out[..., c] = (in[...] == c) for c < num_classes; in and out are int64.
void one_hot(const StridedView& out, const StridedView& in, int64_t num_classes);
// The largest value of a non-empty int64 tensor (one_hot's num_classes = -1).
int64_t max_int64(const StridedView& in);

}  // namespace kiln::cpu
