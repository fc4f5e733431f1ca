#include "kiln/kernels/cpu/det.h"

#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

#include "kiln/kernels/cpu/parallel.h"
#include "kiln/util/error.h"

namespace kiln::cpu {
namespace {

// Element offset of matrix `b` (row-major over the dims before the last
// `matrix_dims`).
int64_t batch_offset(const StridedView& v, int64_t b, int matrix_dims) {
  int64_t offset = 0;
  for (int d = v.ndim - 1 - matrix_dims; d >= 0; --d) {
    offset += (b % v.shape[d]) * v.strides[d];
    b /= v.shape[d];
  }
  return offset;
}

int64_t batch_count(const StridedView& a) {
  int64_t count = 1;
  for (int d = 0; d < a.ndim - 2; ++d)
    count *= a.shape[d];
  return count;
}

// A square matrix in double, row-major, to factor in place.
struct Square {
  int64_t n;
  std::vector<double> m;
  double& at(int64_t i, int64_t j) { return m[size_t(i * n + j)]; }

  template <typename T>
  static Square read(const StridedView& a, int64_t b) {
    const int64_t n = a.shape[a.ndim - 1], rs = a.strides[a.ndim - 2], cs = a.strides[a.ndim - 1];
    const T* p = a.ptr<T>() + batch_offset(a, b, 2);
    Square s{n, std::vector<double>(size_t(n * n))};
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        s.at(i, j) = double(p[i * rs + j * cs]);
    return s;
  }

  void swap_rows(int64_t r, int64_t s) {
    for (int64_t j = 0; j < n; ++j)
      std::swap(at(r, j), at(s, j));
  }
  void swap_cols(int64_t r, int64_t s) {
    for (int64_t i = 0; i < n; ++i)
      std::swap(at(i, r), at(i, s));
  }
  // Eliminates below pivot (k, k), keeping the multipliers there (L).
  void eliminate(int64_t k) {
    for (int64_t i = k + 1; i < n; ++i) {
      const double l = at(i, k) / at(k, k);
      at(i, k) = l;
      for (int64_t j = k + 1; j < n; ++j)
        at(i, j) -= l * at(k, j);
    }
  }
};

double determinant(Square s) {
  double result = 1;
  for (int64_t k = 0; k < s.n; ++k) {
    int64_t pivot = k;
    for (int64_t i = k + 1; i < s.n; ++i)
      if (std::fabs(s.at(i, k)) > std::fabs(s.at(pivot, k))) pivot = i;
    if (s.at(pivot, k) == 0) return 0;  // a zero column below the diagonal: singular
    if (pivot != k) {
      s.swap_rows(k, pivot);
      result = -result;
    }
    result *= s.at(k, k);
    s.eliminate(k);
  }
  return result;
}

// B = P A Q = L U with the largest remaining element as each pivot, so the
// pivots that are 0 are exactly the last n - rank.
struct CompleteLu {
  Square lu;
  std::vector<int64_t> rows, cols;  // B[i][j] = A[rows[i]][cols[j]]
  double sign = 1;                  // det(P) det(Q)
  int64_t rank = 0;

  explicit CompleteLu(Square a) : lu(std::move(a)), rows(size_t(lu.n)), cols(size_t(lu.n)) {
    std::iota(rows.begin(), rows.end(), 0);
    std::iota(cols.begin(), cols.end(), 0);
    for (; rank < lu.n; ++rank) {
      const int64_t k = rank;
      int64_t pr = k, pc = k;
      for (int64_t i = k; i < lu.n; ++i)
        for (int64_t j = k; j < lu.n; ++j)
          if (std::fabs(lu.at(i, j)) > std::fabs(lu.at(pr, pc))) pr = i, pc = j;
      if (lu.at(pr, pc) == 0) break;
      if (pr != k) lu.swap_rows(k, pr), std::swap(rows[size_t(k)], rows[size_t(pr)]), sign = -sign;
      if (pc != k) lu.swap_cols(k, pc), std::swap(cols[size_t(k)], cols[size_t(pc)]), sign = -sign;
      lu.eliminate(k);
    }
  }
};

// adj(U)^T of the upper factor: det(U) U^-T at full rank; at rank n - 1
// (only U's last pivot is 0) its last row, D [-U11^-1 u12; 1]^T with D the
// product of the other pivots; 0 below that rank.
std::vector<double> adjugate_of_upper_transposed(CompleteLu& f) {
  Square& u = f.lu;
  const int64_t n = u.n;
  std::vector<double> adj(size_t(n * n), 0.0);
  if (f.rank < n - 1) return adj;
  const int64_t solved = f.rank;  // columns of U solved for: all, or all but the last
  double pivots = 1;
  for (int64_t k = 0; k < solved; ++k)
    pivots *= u.at(k, k);
  // x = U11^-1 rhs by back substitution over the first `solved` rows.
  auto back_substitute = [&](std::vector<double>& x) {
    for (int64_t i = solved - 1; i >= 0; --i) {
      double v = x[size_t(i)];
      for (int64_t j = i + 1; j < solved; ++j)
        v -= u.at(i, j) * x[size_t(j)];
      x[size_t(i)] = v / u.at(i, i);
    }
  };
  std::vector<double> x(static_cast<size_t>(n));
  if (solved == n) {
    for (int64_t c = 0; c < n; ++c) {  // column c of U^-1 is row c of U^-T
      std::fill(x.begin(), x.end(), 0.0);
      x[size_t(c)] = 1;
      back_substitute(x);
      for (int64_t i = 0; i < n; ++i)
        adj[size_t(c * n + i)] = pivots * x[size_t(i)];
    }
    return adj;
  }
  for (int64_t i = 0; i < solved; ++i)
    x[size_t(i)] = -u.at(i, n - 1);
  back_substitute(x);
  x[size_t(n - 1)] = 1;
  for (int64_t i = 0; i < n; ++i)
    adj[size_t((n - 1) * n + i)] = pivots * x[size_t(i)];
  return adj;
}

// cof(A)[rows[i]][cols[j]] = sign (L^-T adj(U)^T)[i][j], from adj(B) =
// adj(U) adj(L) = adj(U) L^-1 for B = P A Q = L U.
std::vector<double> cofactor(const Square& a) {
  CompleteLu f(a);
  const int64_t n = a.n;
  std::vector<double> y = adjugate_of_upper_transposed(f);
  for (int64_t i = n - 1; i >= 0; --i)  // L^T y = adj(U)^T, L^T unit upper
    for (int64_t k = i + 1; k < n; ++k)
      for (int64_t j = 0; j < n; ++j)
        y[size_t(i * n + j)] -= f.lu.at(k, i) * y[size_t(k * n + j)];
  std::vector<double> cof(size_t(n * n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      cof[size_t(f.rows[size_t(i)] * n + f.cols[size_t(j)])] = f.sign * y[size_t(i * n + j)];
  return cof;
}

template <typename T>
void det_typed(const StridedView& out, const StridedView& a) {
  const int64_t count = batch_count(a);
  parallel_for(count, count > 64, [&](int64_t b) {
    out.ptr<T>()[batch_offset(out, b, 0)] = T(determinant(Square::read<T>(a, b)));
  });
}

template <typename T>
void cofactor_typed(const StridedView& out, const StridedView& a) {
  const int64_t count = batch_count(a), n = a.shape[a.ndim - 1];
  const int64_t rs = out.strides[out.ndim - 2], cs = out.strides[out.ndim - 1];
  parallel_for(count, count > 64, [&](int64_t b) {
    const std::vector<double> cof = cofactor(Square::read<T>(a, b));
    T* o = out.ptr<T>() + batch_offset(out, b, 2);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        o[i * rs + j * cs] = T(cof[size_t(i * n + j)]);
  });
}

}  // namespace

void det(const StridedView& out, const StridedView& a) {
  KILN_ASSERT(a.ndim >= 2 && out.ndim == a.ndim - 2 && a.dtype == out.dtype,
              "det kernel: bad views");
  if (a.dtype == DType::Float64) return det_typed<double>(out, a);
  det_typed<float>(out, a);
}

void det_cofactor(const StridedView& out, const StridedView& a) {
  KILN_ASSERT(a.ndim >= 2 && out.ndim == a.ndim && a.dtype == out.dtype,
              "det_cofactor kernel: bad views");
  if (a.dtype == DType::Float64) return cofactor_typed<double>(out, a);
  cofactor_typed<float>(out, a);
}

}  // namespace kiln::cpu
