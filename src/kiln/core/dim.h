// Dim: one dimension of a shape as shape inference sees it, either a plain
// integer or a SizeExpr over named size symbols (`batch`, `seq*batch`,
// `(h - 3) // 2 + 1`). Every op infers its output shapes once, over Dims, so
// the same code serves eager calls (all static, no allocation) and symbolic
// graphs (issue 21):
//
//   DimList x = {Dim::symbol("batch"), 512};
//   Dim n = x[0] * x[1];                 // 512*batch
//   n == 512 * Dim::symbol("batch");     // true: canonical forms compare equal
//
// Comparisons the canonical form cannot settle (`batch == 1` while
// broadcasting, `seq > 128` in a branch) are decided by the ShapeEnv in scope,
// from the symbols' example values, and recorded as guards that a compiled
// graph checks on every call. With no ShapeEnv in scope, equality of unlike
// forms is taken as false (a shape check then fails with its usual message)
// and an undecidable order is an error naming both sizes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kiln/core/size_expr.h"
#include "kiln/util/int_list.h"

namespace kiln {

class Dim {
 public:
  Dim() = default;
  Dim(int64_t value) : value_(value) {}  // NOLINT(google-explicit-constructor)
  // A constant expression becomes a static Dim.
  Dim(const SizeExpr& expr);  // NOLINT(google-explicit-constructor)
  static Dim symbol(std::string_view name) { return Dim(SizeExpr::symbol(name)); }

  bool is_static() const { return !expr_; }
  bool is_symbolic() const { return bool(expr_); }
  // The value of a static Dim; an internal error for a symbolic one (callers
  // that meet user graphs use require_static, which names the op).
  int64_t static_value() const;
  SizeExpr expr() const;  // a static Dim as a constant expression
  std::string to_string() const;

  // Structural equality (canonical forms), never a guard: for comparing
  // declared and inferred types, and for keys.
  bool same_as(const Dim& other) const;
  size_t hash() const;

 private:
  int64_t value_ = 0;             // when static
  std::optional<SizeExpr> expr_;  // when symbolic (never a constant)
};

using DimList = std::vector<Dim>;

Dim operator+(const Dim& a, const Dim& b);
Dim operator-(const Dim& a, const Dim& b);
Dim operator-(const Dim& a);
Dim operator*(const Dim& a, const Dim& b);
inline Dim& operator+=(Dim& a, const Dim& b) {
  return a = a + b;
}
inline Dim& operator-=(Dim& a, const Dim& b) {
  return a = a - b;
}
inline Dim& operator*=(Dim& a, const Dim& b) {
  return a = a * b;
}
// Python's // and % for a positive static divisor.
Dim floordiv(const Dim& a, int64_t d);
Dim mod(const Dim& a, int64_t d);
Dim max(const Dim& a, const Dim& b);
Dim min(const Dim& a, const Dim& b);
// a / b when b divides a exactly (for every value of the symbols): nothing otherwise.
std::optional<Dim> exact_divide(const Dim& a, const Dim& b);

// Value comparisons: static operands compare directly; otherwise see the
// top of this file.
bool operator==(const Dim& a, const Dim& b);
bool operator<(const Dim& a, const Dim& b);
inline bool operator!=(const Dim& a, const Dim& b) {
  return !(a == b);
}
inline bool operator>(const Dim& a, const Dim& b) {
  return b < a;
}
inline bool operator<=(const Dim& a, const Dim& b) {
  return !(b < a);
}
inline bool operator>=(const Dim& a, const Dim& b) {
  return !(a < b);
}

// a == b where the graph is valid only if they are (the sizes broadcast or
// cat match): true when provably equal or so decided by the ShapeEnv in
// scope (example values, guards); false when provably different (3 vs 4, n
// vs n + 1) or decided so. An equality nothing decides, where the ShapeEnv
// builds a graph without example values (an ONNX import, see
// ShapeEnv::set_assume_undecided), is assumed: recorded as a guard that
// every call checks, as ONNX Runtime checks such sizes when it runs. With no
// ShapeEnv, false, as ==.
bool equal_or_assumed(const Dim& a, const Dim& b);
bool equal_or_assumed(const DimList& a, const DimList& b);  // same rank, every dim

// a < b provably, for every value of the symbols: a validity check that
// holds for example values only is not a reason to reject a graph, so shape
// checks that are not decisions use this and leave the rest to the call.
bool definitely_less(const Dim& a, const Dim& b);

std::ostream& operator<<(std::ostream& os, const Dim& d);
std::string to_string(const DimList& dims);  // "[batch, 512]"

// ---- shapes ----
DimList to_dims(const IntList& values);
bool is_static(const DimList& dims);
// The integers of a static shape. `op` names the caller in the error for a
// symbolic one: "conv2d: needs a concrete size for dim 1 of [batch, seq], got seq".
IntList to_static(const DimList& dims, std::string_view op);
IntList to_static(const DimList& dims);  // an internal error when symbolic
int64_t require_static(const Dim& dim, std::string_view op, std::string_view what);
bool same_dims(const DimList& a, const DimList& b);  // structural, never a guard
// The symbol a dim is by itself ("batch"), or "" for a number or an
// expression: the dims a call's input sizes bind symbols from.
std::string lone_symbol(const Dim& dim);
// The symbols the dims mention, sorted, unique.
std::vector<std::string> symbols_of(const DimList& dims);
// The dims with every symbol bound: static dims.
IntList evaluate(const DimList& dims, const std::map<std::string, int64_t>& bindings);
DimList substitute(const DimList& dims, const std::map<std::string, SizeExpr>& bindings);

// ---- the ShapeEnv ----
// A guard: a fact about the symbols that held for the example values and that
// a decision relied on. `holds` checks it for other values.
struct ShapeGuard {
  enum class Relation { Eq, Ne, Lt, Le };
  SizeExpr lhs, rhs;
  Relation relation;
  std::string reason;  // where the decision was taken ("broadcast in add")

  bool holds(const std::map<std::string, int64_t>& bindings) const;
  std::string to_string() const;  // "seq <= 128"
  bool operator==(const ShapeGuard& other) const;
};

class ShapeEnv {
 public:
  // The example value of a symbol (its value in the call being traced).
  void set_hint(const std::string& symbol, int64_t value);
  std::optional<int64_t> hint(const std::string& symbol) const;
  const std::map<std::string, int64_t>& hints() const { return hints_; }

  // Decides `lhs relation rhs` from the hints and records the outcome as a
  // guard (the relation, or its negation when false). An error when a symbol
  // has no hint.
  bool decide(const SizeExpr& lhs, ShapeGuard::Relation relation, const SizeExpr& rhs);
  // The guards recorded, in order, without repeats.
  const std::vector<ShapeGuard>& guards() const { return guards_; }
  void add_guard(ShapeGuard guard);

  // What the next decisions are for, kept in their guards' reasons.
  void set_context(std::string context) { context_ = std::move(context); }
  const std::string& context() const { return context_; }

  // For a graph built without example values (an ONNX import): an equality
  // that equal_or_assumed() asks and no hint or guard decides becomes a
  // guard (an assumption) and holds; any other equality nothing decides is
  // false, as with no ShapeEnv (instead of an error, as while re-inferring
  // a traced graph, where its guards must decide everything).
  void set_assume_undecided(bool assume) { assume_undecided_ = assume; }
  bool assumes_undecided() const { return assume_undecided_; }
  // `lhs == rhs` as equal_or_assumed() needs it (see set_assume_undecided).
  bool decide_or_assume_equal(const SizeExpr& lhs, const SizeExpr& rhs);

 private:
  // A guard `symbol == value` (a size read as an int) fixes the symbol:
  // later decisions use the value and need no guard of their own.
  std::map<std::string, SizeExpr> fixed_;
  std::map<std::string, int64_t> hints_;
  std::vector<ShapeGuard> guards_;
  std::string context_;
  bool assume_undecided_ = false;
};

// The ShapeEnv decisions on this thread go to, or null.
ShapeEnv* current_shape_env();

// Makes `env` current on this thread for its lifetime (null: none).
class ShapeEnvScope {
 public:
  explicit ShapeEnvScope(ShapeEnv* env);
  ~ShapeEnvScope();
  ShapeEnvScope(const ShapeEnvScope&) = delete;
  ShapeEnvScope& operator=(const ShapeEnvScope&) = delete;

 private:
  ShapeEnv* previous_;
};

}  // namespace kiln

template <>
struct std::hash<kiln::Dim> {
  size_t operator()(const kiln::Dim& d) const noexcept { return d.hash(); }
};
