#include "kiln/kernels/cpu/norm.h"

#include <cmath>

#include "kiln/core/random.h"

namespace kiln::cpu {

template <typename T>
void layer_norm(const T* x, const T* weight, const T* bias, T* y, T* mean, T* rstd, int64_t rows,
                int64_t cols, double eps) {
#pragma omp parallel for if (rows * cols > 65536)
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    // Two passes in double: the row mean first, then the centred variance,
    // which stays accurate when |mean| >> std.
    double sum = 0;
    for (int64_t j = 0; j < cols; ++j)
      sum += double(xr[j]);
    double mu = cols ? sum / double(cols) : 0.0;
    double sq = 0;
    for (int64_t j = 0; j < cols; ++j) {
      double d = double(xr[j]) - mu;
      sq += d * d;
    }
    double inv = 1.0 / std::sqrt((cols ? sq / double(cols) : 0.0) + eps);
    mean[r] = T(mu);
    rstd[r] = T(inv);
    for (int64_t j = 0; j < cols; ++j) {
      double v = (double(xr[j]) - mu) * inv;
      if (weight) v *= double(weight[j]);
      if (bias) v += double(bias[j]);
      yr[j] = T(v);
    }
  }
}

template <typename T>
void batch_norm(const T* x, const T* weight, const T* bias, T* running_mean, T* running_var, T* y,
                T* save_mean, T* save_invstd, int64_t n, int64_t c, int64_t s, bool training,
                double momentum, double eps) {
  const int64_t count = n * s;
#pragma omp parallel for if (n * c * s > 65536)
  for (int64_t ch = 0; ch < c; ++ch) {
    double mu, var;
    if (training) {
      double sum = 0;
      for (int64_t b = 0; b < n; ++b) {
        const T* p = x + (b * c + ch) * s;
        for (int64_t i = 0; i < s; ++i)
          sum += double(p[i]);
      }
      mu = sum / double(count);
      double sq = 0;
      for (int64_t b = 0; b < n; ++b) {
        const T* p = x + (b * c + ch) * s;
        for (int64_t i = 0; i < s; ++i) {
          double d = double(p[i]) - mu;
          sq += d * d;
        }
      }
      var = sq / double(count);
      if (running_mean) {
        running_mean[ch] = T((1 - momentum) * double(running_mean[ch]) + momentum * mu);
      }
      if (running_var) {
        double unbiased = count > 1 ? sq / double(count - 1) : var;
        running_var[ch] = T((1 - momentum) * double(running_var[ch]) + momentum * unbiased);
      }
    } else {
      mu = double(running_mean[ch]);
      var = double(running_var[ch]);
    }
    double inv = 1.0 / std::sqrt(var + eps);
    save_mean[ch] = T(mu);
    save_invstd[ch] = T(inv);
    double scale = inv * (weight ? double(weight[ch]) : 1.0);
    double shift = (bias ? double(bias[ch]) : 0.0) - mu * scale;
    for (int64_t b = 0; b < n; ++b) {
      const T* p = x + (b * c + ch) * s;
      T* q = y + (b * c + ch) * s;
      for (int64_t i = 0; i < s; ++i)
        q[i] = T(double(p[i]) * scale + shift);
    }
  }
}

template <typename T>
void dropout(const T* x, T* y, bool* mask, int64_t n, double p, uint64_t seed,
             uint64_t first_block) {
  const T scale = p < 1.0 ? T(1.0 / (1.0 - p)) : T(0);
  const Generator key(seed);
#pragma omp parallel for if (n > 65536)
  for (int64_t b = 0; b < (n + 3) / 4; ++b) {
    auto words = key.block(first_block + uint64_t(b));
    for (int64_t j = 0; j < 4 && b * 4 + j < n; ++j) {
      int64_t i = b * 4 + j;
      bool keep = double(uniform_float(words[j])) >= p;
      mask[i] = keep;
      y[i] = keep ? x[i] * scale : T(0);
    }
  }
}

template void layer_norm<float>(const float*, const float*, const float*, float*, float*, float*,
                                int64_t, int64_t, double);
template void layer_norm<double>(const double*, const double*, const double*, double*, double*,
                                 double*, int64_t, int64_t, double);
template void batch_norm<float>(const float*, const float*, const float*, float*, float*, float*,
                                float*, float*, int64_t, int64_t, int64_t, bool, double, double);
template void batch_norm<double>(const double*, const double*, const double*, double*, double*,
                                 double*, double*, double*, int64_t, int64_t, int64_t, bool, double,
                                 double);
template void dropout<float>(const float*, float*, bool*, int64_t, double, uint64_t, uint64_t);
template void dropout<double>(const double*, double*, bool*, int64_t, double, uint64_t, uint64_t);

}  // namespace kiln::cpu
