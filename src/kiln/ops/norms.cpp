// Norms and cdist as compositions of ops; see norms.h.
#include "kiln/ops/norms.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/core/shape.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/view.h"

namespace kiln {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// s^(1/p) with the gradient 0 where s is 0 (where it would be infinite,
// and 0 * inf = NaN further down): the power reads a safe 1 there, and the
// result takes 0 instead.
Tensor root_or_zero(const Tensor& s, double p) {
  Tensor zero = s == 0.0;
  Tensor safe = where(zero, 1.0, s);
  Tensor root = p == 2.0 ? sqrt(safe) : pow(safe, 1.0 / p);
  return where(zero, 0.0, root);
}

// The dims a reduction covers, wrapped; empty means all.
IntList wrapped_dims(const IntList& dims, int64_t ndim, const char* fn, const IntList& shape) {
  IntList out;
  for (int64_t d : dims)
    out.push_back(wrap_dim(d, std::max<int64_t>(ndim, 1), fn, shape));
  return out;
}

bool covers_empty(const Tensor& x, const IntList& dims) {
  if (dims.empty()) return x.numel() == 0;
  return std::any_of(dims.begin(), dims.end(),
                     [&](int64_t d) { return x.dim() > 0 && x.size(d) == 0; });
}

Tensor checked_floating(const Tensor& x, std::optional<DType> dtype, const char* fn) {
  Tensor in = dtype ? to(x, *dtype) : x;
  KILN_CHECK(is_floating(in.dtype()), fn,
             ": Expected a floating point or complex tensor as input. ", "Got ", x.dtype());
  return in;
}

// The two reductions of a matrix norm: first the sums of |x| over `sum_dim`,
// then their largest (or smallest) over `pick_dim`, both kept, then squeezed
// unless keepdim.
Tensor sum_then_extreme(const Tensor& x, int64_t sum_dim, int64_t pick_dim, bool largest,
                        bool keepdim) {
  Tensor sums = sum(abs(x), {sum_dim}, true);
  Tensor out = largest ? amax(sums, {pick_dim}, true) : amin(sums, {pick_dim}, true);
  if (keepdim) return out;
  out = squeeze(out, std::max(sum_dim, pick_dim));
  return squeeze(out, std::min(sum_dim, pick_dim));
}

std::string ord_text(const NormOrd& ord) {
  if (const std::string* name = std::get_if<std::string>(&ord)) return *name;
  const double p = std::get<double>(ord);
  std::string text = std::to_string(p);
  if (p == std::trunc(p) && std::isfinite(p)) text = std::to_string(int64_t(p));
  return text;
}

}  // namespace

Tensor vector_norm(const Tensor& x, double ord, IntList dims, bool keepdim,
                   std::optional<DType> dtype) {
  Tensor in = checked_floating(x, dtype, "linalg.vector_norm");
  dims = wrapped_dims(dims, in.dim(), "linalg.vector_norm", in.shape());
  KILN_CHECK(!(std::isinf(ord) || ord < 0) || !covers_empty(in, dims),
             "linalg.vector_norm cannot compute the ", ord_text(ord),
             " norm on an empty tensor because the operation does not have an identity");
  if (ord == kInf) return amax(abs(in), dims, keepdim);
  if (ord == -kInf) return amin(abs(in), dims, keepdim);
  // The count of nonzeros, with a zero gradient path through x (as PyTorch
  // gives the 0-norm a gradient of zeros).
  if (ord == 0.0) return sum(where(in != 0.0, 1.0, in * 0.0), dims, keepdim);
  if (ord == 1.0) return sum(abs(in), dims, keepdim);
  if (ord == 2.0) return root_or_zero(sum(in * in, dims, keepdim), 2.0);
  return root_or_zero(sum(pow(abs(in), ord), dims, keepdim), ord);
}

Tensor matrix_norm(const Tensor& x, const NormOrd& ord, IntList dims, bool keepdim,
                   std::optional<DType> dtype) {
  KILN_CHECK(x.dim() >= 2,
             "linalg.matrix_norm: The input tensor A must have at least 2 dimensions.");
  Tensor in = checked_floating(x, dtype, "linalg.matrix_norm");
  KILN_CHECK(dims.size() == 2, "linalg.matrix_norm: dim must be a 2-tuple. Got ", dims.size(),
             " dims");
  dims = wrapped_dims(dims, in.dim(), "linalg.matrix_norm", in.shape());
  KILN_CHECK(dims[0] != dims[1], "linalg.matrix_norm: dims must be different. Got (", dims[0], ", ",
             dims[1], ")");
  if (const std::string* name = std::get_if<std::string>(&ord)) {
    if (*name == "fro") return vector_norm(in, 2.0, dims, keepdim);
    KILN_CHECK_KIND(ErrorKind::NotImplemented, *name != "nuc",
                    "linalg.matrix_norm: ord='nuc' needs the singular values (an SVD), which kiln "
                    "does not compute");
    KILN_CHECK(false, "linalg.matrix_norm: Order ", *name, " not supported.");
  }
  const double p = std::get<double>(ord);
  KILN_CHECK_KIND(ErrorKind::NotImplemented, std::fabs(p) != 2.0, "linalg.matrix_norm: ord=", p,
                  " needs the singular values (an SVD), which kiln does not compute");
  KILN_CHECK(std::fabs(p) == 1.0 || std::isinf(p), "linalg.matrix_norm: Order ", ord_text(ord),
             " not supported.");
  // 1: columns (sum over rows, dims[0]); inf: rows (sum over dims[1]).
  const bool by_columns = std::fabs(p) == 1.0;
  const int64_t sum_dim = by_columns ? dims[0] : dims[1];
  const int64_t pick_dim = by_columns ? dims[1] : dims[0];
  return sum_then_extreme(in, sum_dim, pick_dim, p > 0, keepdim);
}

Tensor linalg_norm(const Tensor& x, const std::optional<NormOrd>& ord,
                   const std::optional<IntList>& dims, bool keepdim, std::optional<DType> dtype) {
  // A named order is a matrix norm's, whatever the dims (matrix_norm says
  // what is wrong with them).
  auto vector = [&](IntList over) {
    if (ord && std::holds_alternative<std::string>(*ord)) {
      return matrix_norm(x, *ord, std::move(over), keepdim, dtype);
    }
    return vector_norm(x, ord ? std::get<double>(*ord) : 2.0, std::move(over), keepdim, dtype);
  };
  if (dims) {
    KILN_CHECK(dims->size() == 1 || dims->size() == 2,
               "linalg.norm: If dim is specified, it must be of length 1 or 2. Got ", *dims);
    if (dims->size() == 1) return vector(*dims);
    return matrix_norm(x, ord.value_or(std::string("fro")), *dims, keepdim, dtype);
  }
  if (!ord) return vector_norm(x, 2.0, {}, keepdim, dtype);
  KILN_CHECK(x.dim() == 1 || x.dim() == 2,
             "linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got ",
             x.dim(), "D.");
  if (x.dim() == 1) return vector({0});
  return matrix_norm(x, *ord, {-2, -1}, keepdim, dtype);
}

Tensor norm(const Tensor& x, const std::optional<NormOrd>& p, const std::optional<IntList>& dims,
            bool keepdim, std::optional<DType> dtype) {
  const IntList over = dims.value_or(IntList{});
  if (p && std::holds_alternative<std::string>(*p)) {
    const std::string& name = std::get<std::string>(*p);
    if (name == "fro") return vector_norm(x, 2.0, over, keepdim, dtype);
    return matrix_norm(x, name, dims.value_or(IntList{-2, -1}), keepdim, dtype);
  }
  return vector_norm(x, p ? std::get<double>(*p) : 2.0, over, keepdim, dtype);
}

Tensor cdist(const Tensor& x1, const Tensor& x2, double p) {
  KILN_CHECK(x1.dim() >= 2, "cdist only supports at least 2D tensors, X1 got: ", x1.dim(), "D");
  KILN_CHECK(x2.dim() >= 2, "cdist only supports at least 2D tensors, X2 got: ", x2.dim(), "D");
  KILN_CHECK(x1.size(-1) == x2.size(-1),
             "X1 and X2 must have the same number of columns. X1: ", x1.size(-1),
             " X2: ", x2.size(-1));
  KILN_CHECK(is_floating(x1.dtype()) && x1.dtype() == x2.dtype(),
             "cdist only supports floating-point dtypes, the same for X1 and X2; X1 got: ",
             x1.dtype(), ", X2 got: ", x2.dtype());
  KILN_CHECK(p >= 0, "cdist only supports non-negative p values, got ", p);
  // [..., P, 1, M] - [..., 1, R, M] -> [..., P, R, M], then the norm over M.
  Tensor diff = unsqueeze(x1, -2) - unsqueeze(x2, -3);
  return vector_norm(diff, p, {-1}, false);
}

}  // namespace kiln
