#include "kiln/kernels/cpu/rnn.h"

#include "kiln/kernels/cpu/loops.h"
#include "kiln/kernels/cpu/parallel.h"
#include "kiln/kernels/cpu/unary.h"

namespace kiln::cpu {

namespace {

// Rows split across threads only when the step is large: a batch-1 step of
// a few hundred units is over in well under a thread team's start-up.
bool split_rows(int64_t rows, int64_t hidden) {
  return rows > 1 && rows * hidden * 4 >= kParallelGrain && max_threads() > 1;
}

}  // namespace

// The inner loops are over the units of one row, with the activations
// inlined (sigmoid_of and tanh_of are branch-free for float32), so they
// vectorize; each gate is read once.
template <typename T>
void lstm_cell_pointwise(const T* gi, const T* gh, const T* c, T* h_out, T* c_out, int64_t rows,
                         int64_t hidden) {
  const int64_t H = hidden;
  parallel_for(rows, split_rows(rows, H), [&](int64_t r) {
    // One pointer per gate, and `omp simd`: over offsets into one row,
    // GCC's dependence analysis gives up on this loop (five
    // transcendentals, eight streams) and leaves it scalar, 13x slower at
    // 32 x 256 than vectorized.
    const T* __restrict xi = gi + r * 4 * H;
    const T* __restrict xf = xi + H;
    const T* __restrict xg = xi + 2 * H;
    const T* __restrict xo = xi + 3 * H;
    const T* __restrict hi = gh + r * 4 * H;
    const T* __restrict hf = hi + H;
    const T* __restrict hg = hi + 2 * H;
    const T* __restrict ho = hi + 3 * H;
    const T* __restrict cr = c + r * H;
    T* __restrict hr = h_out + r * H;
    T* __restrict cn = c_out + r * H;
#pragma omp simd
    for (int64_t j = 0; j < H; ++j) {
      const T i = sigmoid_of<T>(xi[j] + hi[j]);
      const T f = sigmoid_of<T>(xf[j] + hf[j]);
      const T g = tanh_of<T>(xg[j] + hg[j]);
      const T o = sigmoid_of<T>(xo[j] + ho[j]);
      const T c_new = f * cr[j] + i * g;
      cn[j] = c_new;
      hr[j] = o * tanh_of<T>(c_new);
    }
  });
}

template <typename T>
void gru_cell_pointwise(const T* gi, const T* gh, const T* h, T* h_out, int64_t rows,
                        int64_t hidden) {
  const int64_t H = hidden;
  parallel_for(rows, split_rows(rows, H), [&](int64_t r) {
    const T* xi = gi + r * 3 * H;
    const T* hi = gh + r * 3 * H;
    const T* hr = h + r * H;
    T* out = h_out + r * H;
    for (int64_t j = 0; j < H; ++j) {
      const T reset = sigmoid_of<T>(xi[j] + hi[j]);
      const T update = sigmoid_of<T>(xi[H + j] + hi[H + j]);
      const T n = tanh_of<T>(xi[2 * H + j] + reset * hi[2 * H + j]);
      out[j] = n + update * (hr[j] - n);
    }
  });
}

// Derivatives of sigmoid and tanh from their values.
template <typename T>
T dsigmoid(T s) {
  return s * (T(1) - s);
}
template <typename T>
T dtanh(T t) {
  return T(1) - t * t;
}

//   dc = dc_out + dh o (1 - t²), t = tanh(c_out)
//   da_i = dc g i' ; da_f = dc c f' ; da_g = dc i g' ; da_o = dh t o' ; dc_prev = dc f
template <typename T>
void lstm_cell_pointwise_backward(const T* gi, const T* gh, const T* c, const T* c_out,
                                  const T* dh_out, const T* dc_out, T* dgates, T* dc, int64_t rows,
                                  int64_t hidden) {
  const int64_t H = hidden;
  parallel_for(rows, split_rows(rows, H), [&](int64_t r) {
    const T* __restrict xi = gi + r * 4 * H;
    const T* __restrict xf = xi + H;
    const T* __restrict xg = xi + 2 * H;
    const T* __restrict xo = xi + 3 * H;
    const T* __restrict hi = gh + r * 4 * H;
    const T* __restrict hf = hi + H;
    const T* __restrict hg = hi + 2 * H;
    const T* __restrict ho = hi + 3 * H;
    const T* __restrict cr = c + r * H;
    const T* __restrict cn = c_out + r * H;
    const T* __restrict dhr = dh_out + r * H;
    const T* __restrict dcn = dc_out + r * H;
    T* __restrict di = dgates + r * 4 * H;
    T* __restrict df = di + H;
    T* __restrict dg = di + 2 * H;
    T* __restrict d_o = di + 3 * H;
    T* __restrict dcr = dc + r * H;
#pragma omp simd
    for (int64_t j = 0; j < H; ++j) {
      const T i = sigmoid_of<T>(xi[j] + hi[j]);
      const T f = sigmoid_of<T>(xf[j] + hf[j]);
      const T g = tanh_of<T>(xg[j] + hg[j]);
      const T o = sigmoid_of<T>(xo[j] + ho[j]);
      const T t = tanh_of<T>(cn[j]);
      const T dcell = dcn[j] + dhr[j] * o * dtanh(t);
      di[j] = dcell * g * dsigmoid(i);
      df[j] = dcell * cr[j] * dsigmoid(f);
      dg[j] = dcell * i * dtanh(g);
      d_o[j] = dhr[j] * t * dsigmoid(o);
      dcr[j] = dcell * f;
    }
  });
}

//   dn = dh_out (1 - z) ; da_n = dn n' ; da_r = da_n gh_n r' ; da_z = dh_out (h - n) z'
//   dgi = [da_r, da_z, da_n] ; dgh = [da_r, da_z, da_n r] ; dh = dh_out z
template <typename T>
void gru_cell_pointwise_backward(const T* gi, const T* gh, const T* h, const T* dh_out, T* dgi,
                                 T* dgh, T* dh, int64_t rows, int64_t hidden) {
  const int64_t H = hidden;
  parallel_for(rows, split_rows(rows, H), [&](int64_t r) {
    const T* __restrict xr = gi + r * 3 * H;
    const T* __restrict xz = xr + H;
    const T* __restrict xn = xr + 2 * H;
    const T* __restrict hr = gh + r * 3 * H;
    const T* __restrict hz = hr + H;
    const T* __restrict hn = hr + 2 * H;
    const T* __restrict hp = h + r * H;
    const T* __restrict dy = dh_out + r * H;
    T* __restrict dxr = dgi + r * 3 * H;
    T* __restrict dxz = dxr + H;
    T* __restrict dxn = dxr + 2 * H;
    T* __restrict dhr = dgh + r * 3 * H;
    T* __restrict dhz = dhr + H;
    T* __restrict dhn = dhr + 2 * H;
    T* __restrict dhp = dh + r * H;
#pragma omp simd
    for (int64_t j = 0; j < H; ++j) {
      const T reset = sigmoid_of<T>(xr[j] + hr[j]);
      const T update = sigmoid_of<T>(xz[j] + hz[j]);
      const T n = tanh_of<T>(xn[j] + reset * hn[j]);
      const T da_n = dy[j] * (T(1) - update) * dtanh(n);
      const T da_r = da_n * hn[j] * dsigmoid(reset);
      const T da_z = dy[j] * (hp[j] - n) * dsigmoid(update);
      dxr[j] = da_r;
      dhr[j] = da_r;
      dxz[j] = da_z;
      dhz[j] = da_z;
      dxn[j] = da_n;
      dhn[j] = da_n * reset;
      dhp[j] = dy[j] * update;
    }
  });
}

template void lstm_cell_pointwise<float>(const float*, const float*, const float*, float*, float*,
                                         int64_t, int64_t);
template void lstm_cell_pointwise<double>(const double*, const double*, const double*, double*,
                                          double*, int64_t, int64_t);
template void gru_cell_pointwise<float>(const float*, const float*, const float*, float*, int64_t,
                                        int64_t);
template void gru_cell_pointwise<double>(const double*, const double*, const double*, double*,
                                         int64_t, int64_t);

template void lstm_cell_pointwise_backward<float>(const float*, const float*, const float*,
                                                  const float*, const float*, const float*, float*,
                                                  float*, int64_t, int64_t);
template void lstm_cell_pointwise_backward<double>(const double*, const double*, const double*,
                                                   const double*, const double*, const double*,
                                                   double*, double*, int64_t, int64_t);
template void gru_cell_pointwise_backward<float>(const float*, const float*, const float*,
                                                 const float*, float*, float*, float*, int64_t,
                                                 int64_t);
template void gru_cell_pointwise_backward<double>(const double*, const double*, const double*,
                                                  const double*, double*, double*, double*, int64_t,
                                                  int64_t);

}  // namespace kiln::cpu
