// Normalization and dropout kernels over contiguous float buffers (the op
// glue makes inputs contiguous first).
#pragma once

#include <cstdint>

namespace kiln::cpu {

// Layer norm over rows of length `cols`: y = (x - mean) * rstd * weight + bias.
// weight/bias may be null. mean and rstd (one per row) are written for backward.
template <typename T>
void layer_norm(const T* x, const T* weight, const T* bias, T* y, T* mean, T* rstd, int64_t rows,
                int64_t cols, double eps);

// Batch norm over x laid out [N, C, S] (S = product of spatial dims).
// Training: statistics come from the batch, and running_mean/running_var (if
// non-null) move toward them by `momentum` (running_var gets the unbiased
// variance). Eval: the running statistics are used. save_mean/save_invstd
// (one per channel) are written for backward.
template <typename T>
void batch_norm(const T* x, const T* weight, const T* bias, T* running_mean, T* running_var, T* y,
                T* save_mean, T* save_invstd, int64_t n, int64_t c, int64_t s, bool training,
                double momentum, double eps);

// y = x * mask / (1 - p), mask[i] drawn keep-with-probability (1 - p) from
// Philox blocks first_block.. of the generator with key `seed`.
template <typename T>
void dropout(const T* x, T* y, bool* mask, int64_t n, double p, uint64_t seed,
             uint64_t first_block);

}  // namespace kiln::cpu
