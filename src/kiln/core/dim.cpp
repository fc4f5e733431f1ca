#include "kiln/core/dim.h"

#include <algorithm>
#include <ostream>
#include <set>

#include "kiln/util/error.h"

namespace kiln {

Dim::Dim(const SizeExpr& expr) {
  if (expr.is_constant()) {
    value_ = expr.constant();
  } else {
    expr_ = expr;
  }
}

int64_t Dim::static_value() const {
  KILN_ASSERT(is_static(), "size ", *expr_, " is symbolic where a concrete size was expected");
  return value_;
}

SizeExpr Dim::expr() const {
  return expr_ ? *expr_ : SizeExpr(value_);
}

std::string Dim::to_string() const {
  return expr_ ? expr_->to_string() : std::to_string(value_);
}

bool Dim::same_as(const Dim& other) const {
  if (is_static() != other.is_static()) return false;
  return is_static() ? value_ == other.value_ : *expr_ == *other.expr_;
}

size_t Dim::hash() const {
  return expr_ ? expr_->hash() : std::hash<int64_t>()(value_);
}

namespace {

// Static operands take the integer path: eager shape inference never
// allocates an expression. Overflow is checked as SizeExpr checks it.
template <typename IntOp, typename ExprOp>
Dim combine(const Dim& a, const Dim& b, IntOp int_op, ExprOp expr_op) {
  if (a.is_static() && b.is_static()) {
    int64_t r;
    if (!int_op(a.static_value(), b.static_value(), &r)) return expr_op(a.expr(), b.expr());
    return r;
  }
  return expr_op(a.expr(), b.expr());
}

// Decides a comparison the canonical form cannot, through the ShapeEnv.
bool decide(const Dim& a, ShapeGuard::Relation relation, const Dim& b) {
  ShapeEnv* env = current_shape_env();
  if (env) return env->decide(a.expr(), relation, b.expr());
  if (relation == ShapeGuard::Relation::Eq) return false;
  throw_error(ErrorKind::Runtime,
              str("cannot decide whether ", a, " < ", b,
                  " for every value of the size symbols; this needs an example value "
                  "(trace the code) or a concrete size"));
}

}  // namespace

Dim operator+(const Dim& a, const Dim& b) {
  return combine(
      a, b, [](int64_t x, int64_t y, int64_t* r) { return !__builtin_add_overflow(x, y, r); },
      [](const SizeExpr& x, const SizeExpr& y) { return x + y; });
}

Dim operator-(const Dim& a, const Dim& b) {
  return combine(
      a, b, [](int64_t x, int64_t y, int64_t* r) { return !__builtin_sub_overflow(x, y, r); },
      [](const SizeExpr& x, const SizeExpr& y) { return x - y; });
}

Dim operator-(const Dim& a) {
  return Dim(0) - a;
}

Dim operator*(const Dim& a, const Dim& b) {
  return combine(
      a, b, [](int64_t x, int64_t y, int64_t* r) { return !__builtin_mul_overflow(x, y, r); },
      [](const SizeExpr& x, const SizeExpr& y) { return x * y; });
}

Dim floordiv(const Dim& a, int64_t d) {
  if (a.is_static() && d > 0) {
    int64_t x = a.static_value();
    int64_t q = x / d;
    return (x % d != 0 && x < 0) ? q - 1 : q;
  }
  return floordiv(a.expr(), d);
}

Dim mod(const Dim& a, int64_t d) {
  if (a.is_static() && d > 0) {
    int64_t r = a.static_value() % d;
    return r < 0 ? r + d : r;
  }
  return mod(a.expr(), d);
}

Dim max(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return std::max(a.static_value(), b.static_value());
  return max(a.expr(), b.expr());
}

Dim min(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return std::min(a.static_value(), b.static_value());
  return min(a.expr(), b.expr());
}

std::optional<Dim> exact_divide(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) {
    int64_t x = a.static_value(), y = b.static_value();
    if (y == 0 || x % y != 0) return std::nullopt;
    return x / y;
  }
  std::optional<SizeExpr> q = exact_divide(a.expr(), b.expr());
  if (!q) return std::nullopt;
  return Dim(*q);
}

std::string lone_symbol(const Dim& dim) {
  if (dim.is_static()) return "";
  std::vector<std::string> names = dim.expr().symbols();
  if (names.size() != 1 || !dim.same_as(Dim::symbol(names[0]))) return "";
  return names[0];
}

bool operator==(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return a.static_value() == b.static_value();
  SizeExpr diff = a.expr() - b.expr();
  if (diff.is_constant()) return diff.constant() == 0;
  // Sizes are nonnegative: `seq // 2 == -1` is false for every value.
  if ((diff - 1).provably_nonnegative() || (-diff - 1).provably_nonnegative()) return false;
  return decide(a, ShapeGuard::Relation::Eq, b);
}

bool operator<(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return a.static_value() < b.static_value();
  SizeExpr diff = a.expr() - b.expr();
  if (diff.is_constant()) return diff.constant() < 0;
  // Sizes are nonnegative: `batch // 2 < 0` is false and `-1 < seq` true
  // for every value, with no example value or guard.
  if (diff.provably_nonnegative()) return false;
  if ((-diff - 1).provably_nonnegative()) return true;
  return decide(a, ShapeGuard::Relation::Lt, b);
}

bool equal_or_assumed(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return a.static_value() == b.static_value();
  SizeExpr diff = a.expr() - b.expr();
  if (diff.is_constant()) return diff.constant() == 0;
  if ((diff - 1).provably_nonnegative() || (-diff - 1).provably_nonnegative()) return false;
  ShapeEnv* env = current_shape_env();
  return env && env->decide_or_assume_equal(a.expr(), b.expr());
}

bool equal_or_assumed(const DimList& a, const DimList& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!equal_or_assumed(a[i], b[i])) return false;
  }
  return true;
}

bool definitely_less(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return a.static_value() < b.static_value();
  SizeExpr diff = b.expr() - a.expr() - 1;
  return diff.provably_nonnegative();
}

std::ostream& operator<<(std::ostream& os, const Dim& d) {
  return os << d.to_string();
}

std::string to_string(const DimList& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) out += ", ";
    out += dims[i].to_string();
  }
  return out + "]";
}

DimList to_dims(const IntList& values) {
  return DimList(values.begin(), values.end());
}

bool is_static(const DimList& dims) {
  return std::all_of(dims.begin(), dims.end(), [](const Dim& d) { return d.is_static(); });
}

IntList to_static(const DimList& dims, std::string_view op) {
  IntList out(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    KILN_CHECK(dims[i].is_static(), op, ": needs a concrete size for dim ", i, " of ",
               to_string(dims), ", got ", dims[i]);
    out[i] = dims[i].static_value();
  }
  return out;
}

IntList to_static(const DimList& dims) {
  IntList out(dims.size());
  for (size_t i = 0; i < dims.size(); ++i)
    out[i] = dims[i].static_value();
  return out;
}

int64_t require_static(const Dim& dim, std::string_view op, std::string_view what) {
  KILN_CHECK(dim.is_static(), op, ": needs a concrete ", what, ", got the symbolic size ", dim);
  return dim.static_value();
}

bool same_dims(const DimList& a, const DimList& b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(),
                    [](const Dim& x, const Dim& y) { return x.same_as(y); });
}

std::vector<std::string> symbols_of(const DimList& dims) {
  std::set<std::string> names;
  for (const Dim& d : dims) {
    if (d.is_static()) continue;
    for (std::string& s : d.expr().symbols())
      names.insert(std::move(s));
  }
  return {names.begin(), names.end()};
}

IntList evaluate(const DimList& dims, const std::map<std::string, int64_t>& bindings) {
  IntList out(dims.size());
  for (size_t i = 0; i < dims.size(); ++i)
    out[i] = dims[i].is_static() ? dims[i].static_value() : dims[i].expr().evaluate(bindings);
  return out;
}

DimList substitute(const DimList& dims, const std::map<std::string, SizeExpr>& bindings) {
  DimList out;
  out.reserve(dims.size());
  for (const Dim& d : dims)
    out.push_back(d.is_static() ? d : Dim(d.expr().substitute(bindings)));
  return out;
}

}  // namespace kiln
