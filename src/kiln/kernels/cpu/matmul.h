// Matrix products: oneDNN for float32, a reference loop for float64 and the
// integer dtypes (oneDNN has neither), and a dot-product matrix-vector kernel
// for batch-1 linear layers, where oneDNN's fixed cost per call dominates.
#pragma once

#include <cstdint>
#include <memory>

#include "kiln/kernels/cpu/strided.h"

namespace kiln::cpu {

// out = alpha * (a @ b) + beta * out + bias, per batch entry.
//   a: [..., M, K]   b: [..., K, N]   out: [..., M, N], contiguous
// a and b carry out's batch dims already broadcast (stride 0 where they
// repeat); any strides work. bias is absent (data == nullptr) or 1-D [N].
// beta == 0 ignores out's old contents, NaN included.
void matmul(const StridedView& out, const StridedView& a, const StridedView& b,
            const StridedView& bias, double alpha = 1, double beta = 0);

// The two implementations behind matmul(), exposed for benchmarks and for
// cross-checking one against the other in tests.
void matmul_onednn_f32(const StridedView& out, const StridedView& a, const StridedView& b,
                       const StridedView& bias, double alpha, double beta);
void matmul_reference(const StridedView& out, const StridedView& a, const StridedView& b,
                      const StridedView& bias, double alpha, double beta);

// matmul() for one fixed set of shapes, strides, dtypes, alpha and beta,
// with the implementation chosen and the oneDNN primitive created up front,
// so run() skips the primitive cache. The views given to the constructor
// only lend their geometry (data is not read); run() takes views of that same
// geometry and gives exactly what matmul() gives for them (same primitive).
// run() may be called from several threads at once.
class MatmulPlan {
 public:
  MatmulPlan(const StridedView& out, const StridedView& a, const StridedView& b,
             const StridedView& bias, double alpha = 1, double beta = 0);
  ~MatmulPlan();
  MatmulPlan(const MatmulPlan&) = delete;
  MatmulPlan& operator=(const MatmulPlan&) = delete;

  void run(const StridedView& out, const StridedView& a, const StridedView& b,
           const StridedView& bias) const;

 private:
  struct OneDnn;
  std::unique_ptr<const OneDnn> onednn_;  // null: nothing to do, or the reference loop
  double alpha_, beta_;
  bool empty_;
};

// How matvec_f32 walks and stores. bottom_up walks the rows from the last
// to the first, with the same results: a caller that runs the same weights
// again and again alternates it, so that each call starts on the rows the
// previous call read last, the ones still in L2 when w does not fit there.
// relu stores relu(y) (x < 0 ? 0 : x, so NaN and -0 pass as the relu kernel
// passes them), saving a pass over y.
struct MatvecOptions {
  bool bottom_up = false;
  bool relu = false;
};

// y[j] = dot(x, w + j * w_row_stride) + bias[j * bias_stride] for j < n:
// a linear layer at batch 1 with weight rows of k contiguous floats. bias
// may be null.
void matvec_f32(float* y, const float* x, const float* w, int64_t w_row_stride, const float* bias,
                int64_t bias_stride, int64_t n, int64_t k, MatvecOptions options = {});

// Rows of a linear layer's input and output for matvec_rows_f32.
struct MatvecRows {
  float* y;
  int64_t y_row_stride;
  const float* x;
  int64_t x_row_stride;
  int64_t count;
};

// matvec_f32 for each row of x (a few columns, n <= 4, over many rows: a
// classifier's head at batch 64): four rows of x share each load of a weight
// row instead of one row's scalar dot products per column.
void matvec_rows_f32(const MatvecRows& rows, const float* w, int64_t w_row_stride,
                     const float* bias, int64_t bias_stride, int64_t n, int64_t k,
                     bool relu = false);

}  // namespace kiln::cpu
