#include "kiln/kernels/cpu/matmul.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "kiln/kernels/cpu/copy.h"
#include "kiln/kernels/cpu/loops.h"
#include "kiln/kernels/cpu/onednn.h"
#include "kiln/kernels/cpu/parallel.h"

namespace kiln::cpu {
namespace {

// Element offset of batch entry `index` (row-major over the batch dims).
int64_t batch_offset(const StridedView& v, int64_t index) {
  int64_t offset = 0;
  for (int d = v.ndim - 3; d >= 0; --d) {
    offset += (index % v.shape[d]) * v.strides[d];
    index /= v.shape[d];
  }
  return offset;
}

template <typename T>
void matmul_reference_typed(const StridedView& out, const StridedView& a, const StridedView& b,
                            const StridedView& bias, double alpha, double beta) {
  const int nd = out.ndim;
  const int64_t M = out.shape[nd - 2], N = out.shape[nd - 1], K = a.shape[nd - 1];
  const int64_t rows = M == 0 || N == 0 ? 0 : out.numel() / N;
  const int64_t a_rs = a.strides[nd - 2], a_cs = a.strides[nd - 1];
  const int64_t b_rs = b.strides[nd - 2], b_cs = b.strides[nd - 1];
  const T alpha_t = T(alpha), beta_t = T(beta);
  const bool work_is_large = rows * N * std::max<int64_t>(K, 1) > kParallelGrain;
#pragma omp parallel for if (work_is_large)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t batch = r / M, m = r % M;
    const T* a_row = a.ptr<T>() + batch_offset(a, batch) + m * a_rs;
    const T* b_mat = b.ptr<T>() + batch_offset(b, batch);
    T* out_row = out.ptr<T>() + r * N;
    // i-k-j order: the inner loop walks a row of b, which vectorizes when b
    // is row-major.
    std::vector<T> acc(size_t(N), T(0));
    for (int64_t k = 0; k < K; ++k) {
      const T av = a_row[k * a_cs];
      const T* b_row = b_mat + k * b_rs;
      for (int64_t n = 0; n < N; ++n)
        acc[size_t(n)] += av * b_row[n * b_cs];
    }
    for (int64_t n = 0; n < N; ++n) {
      T value = alpha == 1 ? acc[size_t(n)] : T(alpha_t * acc[size_t(n)]);
      if (beta != 0) value += beta_t * out_row[n];
      if (bias.data) value += bias.ptr<T>()[n * bias.strides[0]];
      out_row[n] = value;
    }
  }
}

// How one operand of a oneDNN matmul is seen as a 3-D [batch, rows, cols]
// strided array. Shapes and strides alone decide it, so a plan can work it
// out once; `packed` operands are copied into a contiguous array per call.
struct Matrix3 {
  int64_t batch = 1, rows = 0, cols = 0;
  int64_t batch_stride = 0, row_stride = 0, col_stride = 0;
  bool packed = false;
};

// Merges the batch dims into one (or into none when all are broadcast).
bool merge_batch_dims(const StridedView& v, Matrix3& m) {
  int64_t batch = 1, stride = 0;
  bool all_broadcast = true;
  for (int d = v.ndim - 3; d >= 0; --d) {
    if (v.shape[d] == 1) continue;
    if (v.strides[d] != 0) all_broadcast = false;
  }
  if (all_broadcast) {
    m.batch = 1;
    m.batch_stride = m.rows * m.cols;
    return true;
  }
  for (int d = v.ndim - 3; d >= 0; --d) {
    if (v.shape[d] == 1) continue;
    if (v.strides[d] == 0) return false;  // partly broadcast: oneDNN cannot say that
    if (batch > 1 && v.strides[d] != stride * batch) return false;
    if (batch == 1) stride = v.strides[d];
    batch *= v.shape[d];
  }
  m.batch = batch;
  m.batch_stride = stride;
  return true;
}

// oneDNN's fast paths want row- or column-major matrices (one unit stride).
bool normalize_inner_strides(Matrix3& m) {
  bool row_major = (m.col_stride == 1 || m.cols == 1) && (m.row_stride >= m.cols || m.rows == 1);
  if (row_major) {
    m.col_stride = 1;
    if (m.rows == 1 || m.row_stride < m.cols) m.row_stride = m.cols;
    return true;
  }
  bool col_major = (m.row_stride == 1 || m.rows == 1) && (m.col_stride >= m.rows || m.cols == 1);
  if (col_major) {
    m.row_stride = 1;
    if (m.cols == 1 || m.col_stride < m.rows) m.col_stride = m.rows;
    return true;
  }
  return false;
}

Matrix3 layout_of(const StridedView& v) {
  Matrix3 m;
  const int nd = v.ndim;
  m.rows = v.shape[nd - 2];
  m.cols = v.shape[nd - 1];
  m.row_stride = v.strides[nd - 2];
  m.col_stride = v.strides[nd - 1];
  if (normalize_inner_strides(m) && merge_batch_dims(v, m)) return m;
  // A contiguous [batch..., rows, cols] copy (repeats included).
  m.packed = true;
  m.batch = v.numel() / std::max<int64_t>(1, m.rows * m.cols);
  m.row_stride = m.cols;
  m.col_stride = 1;
  m.batch_stride = m.rows * m.cols;
  return m;
}

// v's data as `m` describes it: v's own pointer, or a contiguous copy of v
// made in `storage`.
const float* data_in(const Matrix3& m, const StridedView& v, std::vector<float>& storage) {
  if (!m.packed) return v.ptr<const float>();
  storage.resize(size_t(v.numel()));
  StridedView dense = v;
  dense.data = storage.data();
  int64_t stride = 1;
  for (int d = v.ndim - 1; d >= 0; --d) {
    dense.strides[d] = stride;
    stride *= v.shape[d];
  }
  copy_convert(dense, v);
  return storage.data();
}

dnnl::memory::desc desc_of(const Matrix3& m) {
  return onednn::plain_desc({m.batch, m.rows, m.cols},
                            {m.batch_stride, m.row_stride, m.col_stride});
}

// Everything about a oneDNN matmul call that shapes, strides and the scalars
// decide: what the primitive is created from and how the data is passed.
struct MatmulGeometry {
  Matrix3 lhs, rhs;
  int64_t out_batch = 1, out_rows = 0, n = 0;
  bool has_bias = false;
  double alpha = 1, beta = 0;
};

MatmulGeometry matmul_geometry(const StridedView& out, const StridedView& a, const StridedView& b,
                               const StridedView& bias, double alpha, double beta) {
  MatmulGeometry g;
  g.lhs = layout_of(a);
  g.rhs = layout_of(b);
  const int64_t M = g.lhs.rows;
  g.n = g.rhs.cols;
  const int64_t batch = out.numel() / std::max<int64_t>(1, M * g.n);
  // A shared right-hand matrix lets the batch fold into the rows: one big
  // GEMM instead of many small ones (linear on [B, T, K] inputs).
  Matrix3& lhs = g.lhs;
  if (g.rhs.batch == 1 && lhs.batch > 1 && lhs.col_stride == 1 &&
      lhs.batch_stride == M * lhs.row_stride) {
    lhs.rows *= lhs.batch;
    lhs.batch = 1;
    lhs.batch_stride = lhs.rows * lhs.row_stride;
  }
  g.out_batch = lhs.rows == M ? batch : 1;
  g.out_rows = lhs.rows;
  g.has_bias = bias.data != nullptr;
  g.alpha = alpha;
  g.beta = beta;
  return g;
}

onednn::Key key_of(const MatmulGeometry& g) {
  const Matrix3 &lhs = g.lhs, &rhs = g.rhs;
  onednn::Key key;
  key.add(lhs.batch).add(lhs.rows).add(lhs.cols).add(lhs.batch_stride).add(lhs.row_stride);
  key.add(lhs.col_stride).add(rhs.batch).add(rhs.rows).add(rhs.cols).add(rhs.batch_stride);
  key.add(rhs.row_stride).add(rhs.col_stride).add(g.out_batch).add(g.has_bias);
  key.add_double(g.alpha).add_double(g.beta);
  return key;
}

struct MatmulEntry {
  dnnl::matmul prim;
  dnnl::memory::desc src, weights, dst, bias, scratchpad;
};

MatmulEntry make_matmul(const MatmulGeometry& g) {
  MatmulEntry entry;
  entry.src = desc_of(g.lhs);
  entry.weights = desc_of(g.rhs);
  entry.dst = onednn::plain_desc({g.out_batch, g.out_rows, g.n}, {g.out_rows * g.n, g.n, 1});
  if (g.has_bias) entry.bias = onednn::plain_desc({1, 1, g.n}, {g.n, g.n, 1});
  dnnl::primitive_attr attr = onednn::default_attr();
  if (g.alpha != 1) attr.set_output_scales(0, {float(g.alpha)});
  if (g.beta != 0) {
    dnnl::post_ops ops;
    ops.append_sum(float(g.beta));
    attr.set_post_ops(ops);
  }
  dnnl::matmul::desc desc =
      g.has_bias ? dnnl::matmul::desc(entry.src, entry.weights, entry.bias, entry.dst)
                 : dnnl::matmul::desc(entry.src, entry.weights, entry.dst);
  dnnl::matmul::primitive_desc pd(desc, attr, onednn::engine());
  entry.prim = dnnl::matmul(pd);
  entry.scratchpad = pd.scratchpad_desc();
  return entry;
}

void execute_matmul(const MatmulEntry& entry, const MatmulGeometry& g, const StridedView& out,
                    const StridedView& a, const StridedView& b, const StridedView& bias) {
  std::vector<float> lhs_copy, rhs_copy, bias_copy;
  const float* lhs = data_in(g.lhs, a, lhs_copy);
  const float* rhs = data_in(g.rhs, b, rhs_copy);
  const float* bias_data = bias.ptr<const float>();
  if (g.has_bias && bias.strides[0] != 1) {
    bias_copy.resize(size_t(g.n));
    for (int64_t n = 0; n < g.n; ++n)
      bias_copy[size_t(n)] = bias_data[n * bias.strides[0]];
    bias_data = bias_copy.data();
  }
  onednn::execute(entry.prim, {{DNNL_ARG_SRC, onednn::wrap(entry.src, lhs)},
                               {DNNL_ARG_WEIGHTS, onednn::wrap(entry.weights, rhs)},
                               {DNNL_ARG_DST, onednn::wrap(entry.dst, out.data)},
                               {DNNL_ARG_BIAS,
                                g.has_bias ? onednn::wrap(entry.bias, bias_data) : dnnl::memory()},
                               {DNNL_ARG_SCRATCHPAD, onednn::scratchpad(entry.scratchpad)}});
}

onednn::PrimitiveCache<MatmulEntry>& matmul_cache() {
  static onednn::PrimitiveCache<MatmulEntry> cache;
  return cache;
}

// matmul() takes kiln's loop for what oneDNN cannot do.
bool needs_reference(const StridedView& out, const StridedView& a) {
  // An empty sum is 0, so out = beta * out + bias; oneDNN rejects K == 0.
  return a.shape[a.ndim - 1] == 0 || out.dtype != DType::Float32;
}

}  // namespace

void matmul_reference(const StridedView& out, const StridedView& a, const StridedView& b,
                      const StridedView& bias, double alpha, double beta) {
  visit_numeric(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    matmul_reference_typed<T>(out, a, b, bias, alpha, beta);
  });
}

void matmul_onednn_f32(const StridedView& out, const StridedView& a, const StridedView& b,
                       const StridedView& bias, double alpha, double beta) {
  const MatmulGeometry g = matmul_geometry(out, a, b, bias, alpha, beta);
  onednn::guarded("matmul", [&] {
    MatmulEntry entry = matmul_cache().get(key_of(g), [&] { return make_matmul(g); });
    execute_matmul(entry, g, out, a, b, bias);
  });
}

struct MatmulPlan::OneDnn {
  MatmulGeometry geometry;
  MatmulEntry entry;
};

MatmulPlan::MatmulPlan(const StridedView& out, const StridedView& a, const StridedView& b,
                       const StridedView& bias, double alpha, double beta)
    : alpha_(alpha), beta_(beta), empty_(out.numel() == 0) {
  if (empty_ || needs_reference(out, a)) return;
  auto state = std::make_unique<OneDnn>();
  state->geometry = matmul_geometry(out, a, b, bias, alpha, beta);
  onednn::guarded("matmul", [&] { state->entry = make_matmul(state->geometry); });
  onednn_ = std::move(state);
}

MatmulPlan::~MatmulPlan() = default;

void MatmulPlan::run(const StridedView& out, const StridedView& a, const StridedView& b,
                     const StridedView& bias) const {
  if (empty_) return;
  if (!onednn_) {
    matmul_reference(out, a, b, bias, alpha_, beta_);
    return;
  }
  onednn::guarded("matmul",
                  [&] { execute_matmul(onednn_->entry, onednn_->geometry, out, a, b, bias); });
}

void matmul(const StridedView& out, const StridedView& a, const StridedView& b,
            const StridedView& bias, double alpha, double beta) {
  if (out.numel() == 0) return;
  if (needs_reference(out, a)) {
    matmul_reference(out, a, b, bias, alpha, beta);
    return;
  }
  matmul_onednn_f32(out, a, b, bias, alpha, beta);
}

namespace {

// The sums of four vectors' lanes, lane r for v_r, each in the same order:
// (t0 + t2) + (t1 + t3) where t = low half + high half of v_r.
__m128 horizontal_sums4_avx(__m256 v0, __m256 v1, __m256 v2, __m256 v3) {
  const __m256 halves01 =
      _mm256_add_ps(_mm256_permute2f128_ps(v0, v1, 0x20), _mm256_permute2f128_ps(v0, v1, 0x31));
  const __m256 halves23 =
      _mm256_add_ps(_mm256_permute2f128_ps(v2, v3, 0x20), _mm256_permute2f128_ps(v2, v3, 0x31));
  __m128 t0 = _mm256_castps256_ps128(halves01), t1 = _mm256_extractf128_ps(halves01, 1);
  __m128 t2 = _mm256_castps256_ps128(halves23), t3 = _mm256_extractf128_ps(halves23, 1);
  _MM_TRANSPOSE4_PS(t0, t1, t2, t3);  // now t_j holds lane j of every row
  return _mm_add_ps(_mm_add_ps(t0, t2), _mm_add_ps(t1, t3));
}

// Four rows at a time share each load of x; two accumulators per row hide
// the FMA latency (8 independent chains). Batch-1 linears are bound by
// streaming the weights from L3 (W1's do not fit in L2): each step asks for
// the same line of the rows `prefetch_offset` floats on, the next block,
// which took W1 from 10.4 to 9.5 µs (the hardware prefetcher alone does not
// run that far ahead across rows; two or more blocks ahead was slower
// again). Each row sums its lanes, then its k % 16 tail. Inlined into the
// walk over the blocks (always_inline: GCC kept it a call there), which
// took W1's first layer (256 x 512, one thread) from 6.3 to 5.8 µs.
[[gnu::always_inline]] inline __m128 dot4_f32_avx2(const float* x, const float* const rows[4],
                                                   int64_t k, int64_t prefetch_offset) {
  __m256 acc[4][2];
  for (auto& row : acc)
    row[0] = row[1] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);
    for (int r = 0; r < 4; ++r)
      _mm_prefetch(reinterpret_cast<const char*>(rows[r] + prefetch_offset + i), _MM_HINT_T0);
    for (int r = 0; r < 4; ++r) {
      acc[r][0] = _mm256_fmadd_ps(x0, _mm256_loadu_ps(rows[r] + i), acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(x1, _mm256_loadu_ps(rows[r] + i + 8), acc[r][1]);
    }
  }
  __m128 sums = horizontal_sums4_avx(
      _mm256_add_ps(acc[0][0], acc[0][1]), _mm256_add_ps(acc[1][0], acc[1][1]),
      _mm256_add_ps(acc[2][0], acc[2][1]), _mm256_add_ps(acc[3][0], acc[3][1]));
  if (i == k) return sums;
  alignas(16) float tails[4];
  _mm_store_ps(tails, sums);
  for (int r = 0; r < 4; ++r) {
    for (int64_t j = i; j < k; ++j)
      tails[r] += x[j] * rows[r][j];
  }
  return _mm_load_ps(tails);
}

// The rows first, first + 1, ... of a block of four, `count` of them real:
// a short block repeats its last row, so that it sums like a full one.
void block_rows(const float* base, int64_t row_stride, int64_t first, int64_t count,
                const float* rows[4]) {
  for (int64_t r = 0; r < 4; ++r)
    rows[r] = base + (first + std::min(r, count - 1)) * row_stride;
}

// sums + bias when there is one, then relu if asked (max(0, x) returns x
// when the comparison fails: NaN and -0 pass, as the relu kernel passes them).
__m128 finish4(__m128 sums, const __m128* bias, bool relu) {
  if (bias) sums = _mm_add_ps(sums, *bias);
  return relu ? _mm_max_ps(_mm_setzero_ps(), sums) : sums;
}

// Rows j0 .. j0 + 3 of matvec_f32 (fewer at the end); the next block the
// walk takes starts `prefetch_rows` rows away. The four results leave in one
// store with the bias added: storing them one by one and adding the bias
// from a vector load stalled on store forwarding every block (W1 at batch 1
// took ~10% longer).
[[gnu::always_inline]] inline void matvec_block(float* y, const float* x, const float* w,
                                                int64_t w_row_stride, const float* bias,
                                                int64_t bias_stride, int64_t n, int64_t k,
                                                bool relu, int64_t j0, int64_t prefetch_rows) {
  const int64_t count = std::min<int64_t>(4, n - j0);
  // Summed as matvec_rows_f32 sums a row (a row's bits do not depend on
  // the batch size). The bias is read straight into a vector: gathering it
  // through a small array would stall on store forwarding again.
  const float* rows[4];
  block_rows(w, w_row_stride, j0, count, rows);
  __m128 b = _mm_setzero_ps();
  if (bias) {
    const float* b0 = bias + j0 * bias_stride;
    auto at = [&](int64_t r) { return b0[std::min(r, count - 1) * bias_stride]; };
    b = count == 4 && bias_stride == 1 ? _mm_loadu_ps(b0) : _mm_setr_ps(at(0), at(1), at(2), at(3));
  }
  const __m128 sums =
      finish4(dot4_f32_avx2(x, rows, k, prefetch_rows * w_row_stride), bias ? &b : nullptr, relu);
  if (count == 4) {
    _mm_storeu_ps(y + j0, sums);
    return;
  }
  alignas(16) float out4[4];
  _mm_store_ps(out4, sums);
  for (int64_t r = 0; r < count; ++r)
    y[j0 + r] = out4[r];
}

}  // namespace

void matvec_f32(float* y, const float* x, const float* w, int64_t w_row_stride, const float* bias,
                int64_t bias_stride, int64_t n, int64_t k, MatvecOptions options) {
  const int64_t blocks = (n + 3) / 4;
  // Blocks [first, last) in the order options.bottom_up asks for.
  auto walk = [&](int64_t first, int64_t last) {
    if (options.bottom_up) {
      for (int64_t blk = last - 1; blk >= first; --blk)
        matvec_block(y, x, w, w_row_stride, bias, bias_stride, n, k, options.relu, blk * 4, -4);
      return;
    }
    for (int64_t blk = first; blk < last; ++blk)
      matvec_block(y, x, w, w_row_stride, bias, bias_stride, n, k, options.relu, blk * 4, 4);
  };
  // Splitting rows across threads pays only for large weights: for the W1
  // shapes (<= 128K weights) waking a second thread cost more than it saved
  // (bench/kernel_choices.cpp). Small ones, and all of them on one thread,
  // skip OpenMP altogether: even a region that runs on one thread costs
  // libgomp a team setup (an LSTM's 1024 x 256 step, 64 calls in a row on
  // one thread, took 16.3 µs through such a region, which also walked one
  // way only, and 12.2 without it, inlined).
  const int64_t threads = n * k < (int64_t(1) << 18) ? 1 : std::min<int64_t>(max_threads(), blocks);
  if (threads == 1) {
    walk(0, blocks);
    return;
  }
  // One contiguous run of blocks per thread, the same runs on every call,
  // each walked in the asked order: a thread's rows stay in its core's L2.
  const int64_t per_thread = (blocks + threads - 1) / threads;
  parallel_for(threads, true,
               [&](int64_t t) { walk(t * per_thread, std::min(blocks, (t + 1) * per_thread)); });
}

void matvec_rows_f32(const MatvecRows& rows, const float* w, int64_t w_row_stride,
                     const float* bias, int64_t bias_stride, int64_t n, int64_t k, bool relu) {
  // Four rows of x against each weight row (block_rows: a short last block
  // sums like a full one).
  auto block = [&](int64_t r0) {
    const float* x_rows[4];
    block_rows(rows.x, rows.x_row_stride, r0, std::min<int64_t>(4, rows.count - r0), x_rows);
    for (int64_t j = 0; j < n; ++j) {
      const __m128 b = _mm_set1_ps(bias ? bias[j * bias_stride] : 0.0f);
      const __m128 sums = dot4_f32_avx2(w + j * w_row_stride, x_rows, k, 4 * rows.x_row_stride);
      alignas(16) float out4[4];
      _mm_store_ps(out4, finish4(sums, bias ? &b : nullptr, relu));
      for (int64_t r = 0; r < std::min<int64_t>(4, rows.count - r0); ++r)
        rows.y[(r0 + r) * rows.y_row_stride + j] = out4[r];
    }
  };
  const int64_t blocks = (rows.count + 3) / 4;
  // Threads only for 2^18 multiply-adds and more (W1's head at batch 1024):
  // below, waking a second thread cost more than it saved, as in matvec_f32.
  if (rows.count * n * k < (int64_t(1) << 18)) {
    for (int64_t blk = 0; blk < blocks; ++blk)
      block(blk * 4);
    return;
  }
#pragma omp parallel for
  for (int64_t blk = 0; blk < blocks; ++blk)
    block(blk * 4);
}

}  // namespace kiln::cpu
