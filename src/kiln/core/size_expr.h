// Size expressions: the sizes of symbolic dims (issue 21). A dim is an integer
// or a small expression over named size symbols, and every SizeExpr is kept in
// one canonical form, so sizes that are equal by algebra compare equal:
//
//   SizeExpr b = SizeExpr::symbol("batch"), s = SizeExpr::symbol("seq");
//   SizeExpr n = b * s;                                   // batch*seq
//   n == s * b;                                           // true
//   floordiv(SizeExpr::symbol("h") - 3, 2) + 1;           // (h - 3) // 2 + 1
//   n.evaluate({{"batch", 8}, {"seq", 128}});             // 1024
//   parse_size_expr("seq * batch") == n;                  // true
//
// Canonical form (Note [SizeExpr canonical form] in size_expr.cpp): a sum of
// terms, each a nonzero integer coefficient times a product of atoms with
// exponents. An atom is a symbol, or a floordiv, mod, max or min that the
// rules could not reduce, whose operands are canonical in turn. Terms and
// factors are sorted structurally (never by address) and like terms combined.
// The form is sound but not complete: equal forms always have equal values,
// but a few equal values keep different forms (`(x + 5) // 2` and
// `(x + 1) // 2 + 2`); a shape check that needs more asks at run time.
//
// Arithmetic follows Python on int64: `//` floors and `%` takes the divisor's
// sign, also for negative values; divisors are positive constants. A
// coefficient or value that leaves int64 (or is INT64_MIN, which has no
// negation) is an error, never wrap-around.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

struct SizeExprNode;  // the canonical sum of terms, defined in size_expr.cpp

class SizeExpr {
 public:
  SizeExpr();  // the constant 0
  // Implicit, so that `h - 3` and `2 * batch` read as they do in Python.
  SizeExpr(int64_t value);  // NOLINT(google-explicit-constructor)
  // `name` is an identifier [A-Za-z_][A-Za-z0-9_]* other than max and min.
  static SizeExpr symbol(std::string_view name);

  bool is_constant() const;
  // True when the value is >= 0 for every nonnegative value of the symbols
  // (sizes never are negative); false when that is not certain.
  bool provably_nonnegative() const;
  // The value of a constant expression; an error naming the expression otherwise.
  int64_t constant() const;
  // The symbols it mentions (inside floordiv, mod, max and min too), sorted, unique.
  std::vector<std::string> symbols() const;

  // The value with every symbol bound; an unbound symbol is an error that
  // names it and the expression. The lookup returns nothing for unbound names.
  using SymbolLookup = std::function<std::optional<int64_t>(const std::string&)>;
  int64_t evaluate(const std::map<std::string, int64_t>& bindings) const;
  int64_t evaluate(const SymbolLookup& lookup) const;

  // Replaces the bound symbols and simplifies again; others stay as they are.
  SizeExpr substitute(const std::map<std::string, SizeExpr>& bindings) const;

  // The IR's text form, which parse_size_expr reads back: `batch*seq`,
  // `2*batch + 1`, `(h - 3) // 2 + 1`, `batch % 4`, `max(a, b)`.
  std::string to_string() const;

  // Equal iff the canonical forms are equal; the order is structural and
  // deterministic (the same in every run), so it can key a std::map.
  friend bool operator==(const SizeExpr& a, const SizeExpr& b);
  friend std::strong_ordering operator<=>(const SizeExpr& a, const SizeExpr& b);
  size_t hash() const;

  // Internal: the canonical node, for size_expr.cpp.
  explicit SizeExpr(std::shared_ptr<const SizeExprNode> node) : node_(std::move(node)) {}
  const SizeExprNode& node() const { return *node_; }

 private:
  std::shared_ptr<const SizeExprNode> node_;  // never null
};

SizeExpr operator+(const SizeExpr& a, const SizeExpr& b);
SizeExpr operator-(const SizeExpr& a, const SizeExpr& b);
SizeExpr operator-(const SizeExpr& a);
SizeExpr operator*(const SizeExpr& a, const SizeExpr& b);
// Python's a // d and a % d for a constant divisor d > 0.
SizeExpr floordiv(const SizeExpr& a, int64_t d);
SizeExpr mod(const SizeExpr& a, int64_t d);
SizeExpr max(const SizeExpr& a, const SizeExpr& b);
// a / b when b divides a as polynomials over the symbols and atoms
// (`batch*seq*8 / seq` = `8*batch`, `(1024*n + 1024) / (n + 1)` = `1024`);
// nothing otherwise.
std::optional<SizeExpr> exact_divide(const SizeExpr& a, const SizeExpr& b);
SizeExpr min(const SizeExpr& a, const SizeExpr& b);
// Every coefficient (the constant too) rounded up to a multiple of m > 0:
// always a multiple of m, and at least `a` wherever every monomial is
// nonnegative (sizes). `24*batch + 100` rounds to `64*batch + 128` for 64:
// an aligned size that stays a polynomial, so plans can compare it.
SizeExpr round_up_coefficients(const SizeExpr& a, int64_t m);

std::ostream& operator<<(std::ostream& os, const SizeExpr& e);

// Reads the text form: integers, identifiers, + - * // %, unary minus,
// parentheses, max(a, b, ...) and min(a, b, ...), with Python's precedence.
// Bad input is a kiln::Error (ErrorKind::Value) naming the text and the
// 0-based position of the problem.
SizeExpr parse_size_expr(std::string_view text);

}  // namespace kiln

template <>
struct std::hash<kiln::SizeExpr> {
  size_t operator()(const kiln::SizeExpr& e) const noexcept { return e.hash(); }
};
