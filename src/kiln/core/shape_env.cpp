// ShapeEnv and ShapeGuard (declared in dim.h): the decisions on symbolic sizes
// taken from example values while tracing, kept as guards.
#include <algorithm>
#include <limits>
#include <optional>

#include "kiln/core/dim.h"
#include "kiln/util/error.h"

namespace kiln {
namespace {

thread_local ShapeEnv* t_current_env = nullptr;

using Relation = ShapeGuard::Relation;

bool compare(int64_t a, Relation relation, int64_t b) {
  switch (relation) {
    case Relation::Eq:
      return a == b;
    case Relation::Ne:
      return a != b;
    case Relation::Lt:
      return a < b;
    case Relation::Le:
      return a <= b;
  }
  return false;
}

const char* relation_text(Relation relation) {
  switch (relation) {
    case Relation::Eq:
      return "==";
    case Relation::Ne:
      return "!=";
    case Relation::Lt:
      return "<";
    case Relation::Le:
      return "<=";
  }
  return "?";
}

}  // namespace

bool ShapeGuard::holds(const std::map<std::string, int64_t>& bindings) const {
  return compare(lhs.evaluate(bindings), relation, rhs.evaluate(bindings));
}

std::string ShapeGuard::to_string() const {
  return str(lhs, " ", relation_text(relation), " ", rhs);
}

bool ShapeGuard::operator==(const ShapeGuard& other) const {
  return relation == other.relation && lhs == other.lhs && rhs == other.rhs;
}

void ShapeEnv::set_hint(const std::string& symbol, int64_t value) {
  hints_[symbol] = value;
}

std::optional<int64_t> ShapeEnv::hint(const std::string& symbol) const {
  auto it = hints_.find(symbol);
  if (it == hints_.end()) return std::nullopt;
  return it->second;
}

namespace {

Relation negation(Relation relation) {
  switch (relation) {
    case Relation::Eq:
      return Relation::Ne;
    case Relation::Ne:
      return Relation::Eq;
    case Relation::Lt:
      return Relation::Le;  // with the sides swapped
    case Relation::Le:
      return Relation::Lt;  // with the sides swapped
  }
  return relation;
}

// The guard saying `lhs relation rhs` is false.
ShapeGuard negated(const SizeExpr& lhs, Relation relation, const SizeExpr& rhs,
                   const std::string& reason) {
  bool swap = relation == Relation::Lt || relation == Relation::Le;
  return swap ? ShapeGuard{rhs, lhs, negation(relation), reason}
              : ShapeGuard{lhs, rhs, negation(relation), reason};
}

bool has_all_hints(const ShapeEnv& env, const SizeExpr& e) {
  for (const std::string& s : e.symbols()) {
    if (!env.hint(s)) return false;
  }
  return true;
}

// What a recorded guard says of d = rhs - lhs of a new question, when its
// own difference is d or -d: an interval (and whether d may be 0), from
// which `asked` may follow. seq > 128 recorded answers seq >= 128 with no
// second guard.
std::optional<bool> implied_by(const ShapeGuard& guard, const SizeExpr& d, Relation asked) {
  constexpr int64_t kInf = std::numeric_limits<int64_t>::max();
  const SizeExpr known = guard.rhs - guard.lhs;
  const int sign = known == d ? 1 : (known == -d ? -1 : 0);
  if (sign == 0) return std::nullopt;
  int64_t lo = -kInf, hi = kInf;  // bounds of `known`
  bool nonzero = false;
  if (guard.relation == Relation::Eq) lo = hi = 0;
  if (guard.relation == Relation::Ne) nonzero = true;
  if (guard.relation == Relation::Lt) lo = 1;
  if (guard.relation == Relation::Le) lo = 0;
  if (sign < 0) {  // bounds of d = -known
    const int64_t negated_lo = hi == kInf ? -kInf : -hi;
    hi = lo == -kInf ? kInf : -lo;
    lo = negated_lo;
  }
  const bool excludes_zero = nonzero || lo > 0 || hi < 0;
  switch (asked) {
    case Relation::Eq:
      if (lo == 0 && hi == 0) return true;
      return excludes_zero ? std::optional<bool>(false) : std::nullopt;
    case Relation::Ne:
      if (lo == 0 && hi == 0) return false;
      return excludes_zero ? std::optional<bool>(true) : std::nullopt;
    case Relation::Lt:  // d >= 1
      if (lo >= 1) return true;
      return hi <= 0 ? std::optional<bool>(false) : std::nullopt;
    case Relation::Le:  // d >= 0
      if (lo >= 0) return true;
      return hi < 0 ? std::optional<bool>(false) : std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

bool ShapeEnv::decide(const SizeExpr& given_lhs, Relation relation, const SizeExpr& given_rhs) {
  const SizeExpr lhs = fixed_.empty() ? given_lhs : given_lhs.substitute(fixed_);
  const SizeExpr rhs = fixed_.empty() ? given_rhs : given_rhs.substitute(fixed_);
  if (lhs.is_constant() && rhs.is_constant())
    return compare(lhs.constant(), relation, rhs.constant());
  const SizeExpr difference = rhs - lhs;
  for (const ShapeGuard& guard : guards_) {
    if (std::optional<bool> known = implied_by(guard, difference, relation)) return *known;
  }
  // Without example values (a graph re-inferred after tracing) the recorded
  // guards are the facts: a decision taken while tracing is taken again.
  if (!has_all_hints(*this, lhs) || !has_all_hints(*this, rhs)) {
    ShapeGuard as_asked{lhs, rhs, relation, ""};
    if (std::find(guards_.begin(), guards_.end(), as_asked) != guards_.end()) return true;
    ShapeGuard opposite = negated(lhs, relation, rhs, "");
    if (std::find(guards_.begin(), guards_.end(), opposite) != guards_.end()) return false;
    if (assume_undecided_ && relation == Relation::Eq) return false;
    if (assume_undecided_ && relation == Relation::Ne) return true;
    throw_error(ErrorKind::Runtime,
                str("cannot decide whether ", as_asked.to_string(),
                    " for every value of the size symbols, and no guard of the graph says"));
  }
  auto lookup = [&](const std::string& name) { return hint(name); };
  bool result = compare(lhs.evaluate(lookup), relation, rhs.evaluate(lookup));
  // Record what held: the relation itself, or its negation (a < b false is b <= a).
  ShapeGuard guard =
      result ? ShapeGuard{lhs, rhs, relation, context_} : negated(lhs, relation, rhs, context_);
  add_guard(std::move(guard));
  return result;
}

bool ShapeEnv::decide_or_assume_equal(const SizeExpr& given_lhs, const SizeExpr& given_rhs) {
  if (!assume_undecided_) return decide(given_lhs, Relation::Eq, given_rhs);
  const SizeExpr lhs = fixed_.empty() ? given_lhs : given_lhs.substitute(fixed_);
  const SizeExpr rhs = fixed_.empty() ? given_rhs : given_rhs.substitute(fixed_);
  if (lhs.is_constant() && rhs.is_constant()) return lhs.constant() == rhs.constant();
  for (const ShapeGuard& guard : guards_) {
    if (std::optional<bool> known = implied_by(guard, rhs - lhs, Relation::Eq)) return *known;
  }
  if (has_all_hints(*this, lhs) && has_all_hints(*this, rhs)) return decide(lhs, Relation::Eq, rhs);
  add_guard(ShapeGuard{lhs, rhs, Relation::Eq, context_});
  return true;
}

void ShapeEnv::add_guard(ShapeGuard guard) {
  if (std::find(guards_.begin(), guards_.end(), guard) != guards_.end()) return;
  std::string symbol = lone_symbol(Dim(guard.lhs));
  if (guard.relation == Relation::Eq && guard.rhs.is_constant() && !symbol.empty())
    fixed_.emplace(symbol, guard.rhs);
  guards_.push_back(std::move(guard));
}

ShapeEnv* current_shape_env() {
  return t_current_env;
}

ShapeEnvScope::ShapeEnvScope(ShapeEnv* env) : previous_(t_current_env) {
  t_current_env = env;
}

ShapeEnvScope::~ShapeEnvScope() {
  t_current_env = previous_;
}

}  // namespace kiln
