#include "kiln/core/size_expr.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <ostream>
#include <set>
#include <utility>

#include "kiln/util/error.h"

namespace kiln {

// Note [SizeExpr canonical form]
// A SizeExpr is a sum of terms  c * a1^e1 * a2^e2 * ...  where c is a nonzero
// int64 (never INT64_MIN, so negating never overflows), each e >= 1, and each
// atom a is one of
//   symbol        batch
//   floordiv      x // d    d > 1, x not constant, no term of x divisible by d
//   mod           x % d     d > 1, every coefficient of x in [1, d)
//   max, min      max(x, y, ...)  >= 2 arguments, sorted, none a constant
//                 distance from another, none itself a max (or min)
// with every operand canonical in turn. Factors are sorted by atom and terms
// by monomial (higher degree first, so the constant comes last), both with a
// structural order, and terms with equal monomials are added. Sums, products
// and negation are then exact polynomial arithmetic over the atoms, so the
// ring laws (commutativity, distributivity, x - x = 0) always give equal
// forms; the division and max/min rules below are sound simplifications.

enum class AtomKind : uint8_t { Symbol, FloorDiv, Mod, Max, Min };

struct SizeAtom {
  AtomKind kind;
  std::string name;            // Symbol
  std::vector<SizeExpr> args;  // FloorDiv, Mod: {dividend}; Max, Min: the arguments
  int64_t divisor = 0;         // FloorDiv, Mod
  size_t hash = 0;
  int depth = 1;  // 1 + the deepest argument's depth
};

struct SizeFactor {
  std::shared_ptr<const SizeAtom> atom;
  int64_t exp;
};

struct SizeTerm {
  int64_t coeff;
  std::vector<SizeFactor> factors;  // empty for the constant term
};

struct SizeExprNode {
  std::vector<SizeTerm> terms;
  size_t hash = 0;
  int depth = 0;  // the deepest atom's depth
};

namespace {

// Atoms nest at most this deep, so that the recursive walks (compare, print,
// evaluate) stay far from the stack limit even on hostile input such as
// `x % 1000 % 999 % 998 ...`; real sizes nest a few levels.
constexpr int kMaxDepth = 1000;

int64_t add_i(int64_t a, int64_t b) {
  int64_t r;
  KILN_CHECK_VALUE(!__builtin_add_overflow(a, b, &r) && r != INT64_MIN, "size expression: ", a,
                   " + ", b, " overflows int64");
  return r;
}

int64_t mul_i(int64_t a, int64_t b) {
  int64_t r;
  KILN_CHECK_VALUE(!__builtin_mul_overflow(a, b, &r) && r != INT64_MIN, "size expression: ", a,
                   " * ", b, " overflows int64");
  return r;
}

int64_t pow_i(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (true) {
    if (exp & 1) result = mul_i(result, base);
    exp >>= 1;
    if (exp == 0) return result;
    base = mul_i(base, base);
  }
}

// Python's a // d and a % d for d > 0: the quotient rounds down, the
// remainder is in [0, d).
int64_t floor_div_i(int64_t a, int64_t d) {
  int64_t q = a / d;
  return (a % d != 0 && a < 0) ? q - 1 : q;
}

int64_t mod_i(int64_t a, int64_t d) {
  int64_t r = a % d;
  return r < 0 ? r + d : r;
}

template <typename T>
int three_way(const T& a, const T& b) {
  return a < b ? -1 : (b < a ? 1 : 0);
}

size_t mix(size_t h, size_t v) {
  return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
}

int compare_nodes(const SizeExprNode& a, const SizeExprNode& b);

int compare_atoms(const SizeAtom& a, const SizeAtom& b) {
  if (&a == &b) return 0;
  if (int c = three_way(a.kind, b.kind)) return c;
  if (a.kind == AtomKind::Symbol) return three_way(a.name, b.name);
  if (int c = three_way(a.divisor, b.divisor)) return c;
  for (size_t i = 0; i < std::min(a.args.size(), b.args.size()); ++i) {
    if (int c = compare_nodes(a.args[i].node(), b.args[i].node())) return c;
  }
  return three_way(a.args.size(), b.args.size());
}

int64_t degree(const SizeTerm& t) {
  int64_t d = 0;
  for (const SizeFactor& f : t.factors)
    d = add_i(d, f.exp);
  return d;
}

// The order of terms in a sum: higher degree first, so the constant comes
// last (`2*batch + 1`); then by factors, a higher power first (`x*x + x*y`).
int compare_monomials(const SizeTerm& a, const SizeTerm& b) {
  if (int c = three_way(degree(b), degree(a))) return c;
  for (size_t i = 0; i < std::min(a.factors.size(), b.factors.size()); ++i) {
    if (int c = compare_atoms(*a.factors[i].atom, *b.factors[i].atom)) return c;
    if (int c = three_way(b.factors[i].exp, a.factors[i].exp)) return c;
  }
  return three_way(a.factors.size(), b.factors.size());
}

int compare_nodes(const SizeExprNode& a, const SizeExprNode& b) {
  if (&a == &b) return 0;
  for (size_t i = 0; i < std::min(a.terms.size(), b.terms.size()); ++i) {
    if (int c = compare_monomials(a.terms[i], b.terms[i])) return c;
    if (int c = three_way(a.terms[i].coeff, b.terms[i].coeff)) return c;
  }
  return three_way(a.terms.size(), b.terms.size());
}

// Sorts the terms, adds the ones with equal monomials and drops zeros: the
// canonical sum of Note [SizeExpr canonical form].
SizeExpr make_sum(std::vector<SizeTerm> terms) {
  std::sort(terms.begin(), terms.end(),
            [](const SizeTerm& a, const SizeTerm& b) { return compare_monomials(a, b) < 0; });
  std::vector<SizeTerm> out;
  for (SizeTerm& t : terms) {
    if (!out.empty() && compare_monomials(out.back(), t) == 0) {
      out.back().coeff = add_i(out.back().coeff, t.coeff);
      continue;
    }
    out.push_back(std::move(t));
  }
  std::erase_if(out, [](const SizeTerm& t) { return t.coeff == 0; });
  auto node = std::make_shared<SizeExprNode>();
  node->terms = std::move(out);
  size_t h = 0;
  for (const SizeTerm& t : node->terms) {
    h = mix(h, std::hash<int64_t>()(t.coeff));
    for (const SizeFactor& f : t.factors) {
      h = mix(mix(h, f.atom->hash), std::hash<int64_t>()(f.exp));
      node->depth = std::max(node->depth, f.atom->depth);
    }
  }
  node->hash = h;
  return SizeExpr(std::shared_ptr<const SizeExprNode>(std::move(node)));
}

SizeExpr atom_expr(SizeAtom atom) {
  size_t h = mix(std::hash<int>()(int(atom.kind)), std::hash<std::string>()(atom.name));
  h = mix(h, std::hash<int64_t>()(atom.divisor));
  for (const SizeExpr& a : atom.args) {
    h = mix(h, a.hash());
    atom.depth = std::max(atom.depth, a.node().depth + 1);
  }
  KILN_CHECK_VALUE(atom.depth <= kMaxDepth,
                   "size expression: floordiv, mod, max and min nest more than ", kMaxDepth,
                   " deep");
  atom.hash = h;
  std::vector<SizeTerm> terms(1);
  terms[0].coeff = 1;
  terms[0].factors.push_back({std::make_shared<const SizeAtom>(std::move(atom)), 1});
  return make_sum(std::move(terms));
}

// The atom when the term (the expression) is exactly 1*atom, else null.
const SizeAtom* term_atom(const SizeTerm& t) {
  if (t.coeff != 1 || t.factors.size() != 1 || t.factors[0].exp != 1) return nullptr;
  return t.factors[0].atom.get();
}

const SizeAtom* lone_atom(const SizeExpr& e) {
  return e.node().terms.size() == 1 ? term_atom(e.node().terms[0]) : nullptr;
}

bool is_division(const SizeAtom& a) {
  return a.kind == AtomKind::FloorDiv || a.kind == AtomKind::Mod;
}

std::vector<SizeFactor> multiply_factors(const std::vector<SizeFactor>& a,
                                         const std::vector<SizeFactor>& b) {
  std::vector<SizeFactor> out;
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    int c = i == a.size() ? 1 : j == b.size() ? -1 : compare_atoms(*a[i].atom, *b[j].atom);
    if (c < 0) {
      out.push_back(a[i++]);
    } else if (c > 0) {
      out.push_back(b[j++]);
    } else {
      out.push_back({a[i].atom, add_i(a[i].exp, b[j].exp)});
      ++i, ++j;
    }
  }
  return out;
}

// Divides every coefficient by the gcd g of `d` and the coefficients and
// returns g (which leaves d / g > 1 when some coefficient is not a multiple of d).
int64_t cancel_gcd(std::vector<SizeTerm>& terms, int64_t d) {
  int64_t g = d;
  for (const SizeTerm& t : terms)
    g = std::gcd(g, t.coeff);
  if (g > 1) {
    for (SizeTerm& t : terms)
      t.coeff /= g;
  }
  return g;
}

bool is_identifier(std::string_view s) {
  auto head = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (s.empty() || !head(s[0])) return false;
  return std::all_of(s.begin() + 1, s.end(),
                     [&](char c) { return head(c) || (c >= '0' && c <= '9'); });
}

SizeExpr extremum(AtomKind kind, const SizeExpr& a, const SizeExpr& b) {
  // Flatten: max(max(a, b), c) = max(a, b, c), so the nesting does not matter.
  std::vector<SizeExpr> args;
  for (const SizeExpr* e : {&a, &b}) {
    const SizeAtom* atom = lone_atom(*e);
    if (atom && atom->kind == kind) {
      args.insert(args.end(), atom->args.begin(), atom->args.end());
    } else {
      args.push_back(*e);
    }
  }
  // When x - y is a constant c, max(x, y) = (c >= 0 ? x : y) for every
  // binding (min the other way round). This folds constants, max(e, e) = e
  // and max(x + 1, x) = x + 1. At most one kept argument can be a constant
  // distance from x: two such would be a constant distance from each other.
  std::vector<SizeExpr> kept;
  for (const SizeExpr& x : args) {
    bool merged = false;
    for (SizeExpr& y : kept) {
      int64_t c;
      if (x.is_constant() && y.is_constant()) {
        c = three_way(x.constant(), y.constant());
      } else {
        SizeExpr diff = x - y;
        if (!diff.is_constant()) continue;
        c = diff.constant();
      }
      if (kind == AtomKind::Max ? c > 0 : c < 0) y = x;
      merged = true;
      break;
    }
    if (!merged) kept.push_back(x);
  }
  if (kept.size() == 1) return kept[0];
  std::sort(kept.begin(), kept.end());
  return atom_expr({kind, "", std::move(kept), 0, 0, 1});
}

int64_t eval_node(const SizeExprNode& node, const SizeExpr::SymbolLookup& lookup,
                  const SizeExpr& whole);

int64_t eval_atom(const SizeAtom& atom, const SizeExpr::SymbolLookup& lookup,
                  const SizeExpr& whole) {
  if (atom.kind == AtomKind::Symbol) {
    std::optional<int64_t> v = lookup(atom.name);
    KILN_CHECK_VALUE(v.has_value(), "evaluate: symbol '", atom.name, "' is unbound in ", whole);
    return *v;
  }
  std::vector<int64_t> args;
  for (const SizeExpr& a : atom.args)
    args.push_back(eval_node(a.node(), lookup, whole));
  if (atom.kind == AtomKind::FloorDiv) return floor_div_i(args[0], atom.divisor);
  if (atom.kind == AtomKind::Mod) return mod_i(args[0], atom.divisor);
  if (atom.kind == AtomKind::Max) return *std::max_element(args.begin(), args.end());
  return *std::min_element(args.begin(), args.end());
}

int64_t eval_node(const SizeExprNode& node, const SizeExpr::SymbolLookup& lookup,
                  const SizeExpr& whole) {
  int64_t sum = 0;
  for (const SizeTerm& t : node.terms) {
    int64_t product = t.coeff;
    for (const SizeFactor& f : t.factors)
      product = mul_i(product, pow_i(eval_atom(*f.atom, lookup, whole), f.exp));
    sum = add_i(sum, product);
  }
  return sum;
}

void collect_symbols(const SizeExprNode& node, std::set<std::string>& out) {
  for (const SizeTerm& t : node.terms) {
    for (const SizeFactor& f : t.factors) {
      if (f.atom->kind == AtomKind::Symbol) out.insert(f.atom->name);
      for (const SizeExpr& a : f.atom->args)
        collect_symbols(a.node(), out);
    }
  }
}

SizeExpr substitute_atom(const SizeAtom& atom, const std::map<std::string, SizeExpr>& bindings) {
  std::vector<SizeExpr> args;
  for (const SizeExpr& a : atom.args)
    args.push_back(a.substitute(bindings));
  switch (atom.kind) {
    case AtomKind::Symbol: {
      auto it = bindings.find(atom.name);
      return it != bindings.end() ? it->second : SizeExpr::symbol(atom.name);
    }
    case AtomKind::FloorDiv:
      return floordiv(args[0], atom.divisor);
    case AtomKind::Mod:
      return mod(args[0], atom.divisor);
    case AtomKind::Max:
    case AtomKind::Min: {
      SizeExpr out = args[0];
      for (size_t i = 1; i < args.size(); ++i)
        out = atom.kind == AtomKind::Max ? max(out, args[i]) : min(out, args[i]);
      return out;
    }
  }
  KILN_ASSERT(false, "unknown size atom kind");
}

void print_sum(std::string& out, const SizeExprNode& node);

void print_atom(std::string& out, const SizeAtom& atom, bool parenthesize) {
  if (atom.kind == AtomKind::Symbol) {
    out += atom.name;
    return;
  }
  if (!is_division(atom)) {
    out += atom.kind == AtomKind::Max ? "max(" : "min(";
    for (size_t i = 0; i < atom.args.size(); ++i) {
      if (i > 0) out += ", ";
      print_sum(out, atom.args[i].node());
    }
    out += ')';
    return;
  }
  // The dividend keeps parentheses unless it is one positive term that is
  // not a division itself: `batch % 4`, `2*x // 3`, but `(h - 3) // 2`,
  // `(-x) // 2` (Python reads -x // 2 as (-x) // 2, but a reader may not)
  // and `(x % 6) % 4`.
  const SizeExpr& x = atom.args[0];
  const SizeAtom* lone = lone_atom(x);
  bool bare =
      x.node().terms.size() == 1 && x.node().terms[0].coeff > 0 && !(lone && is_division(*lone));
  if (parenthesize) out += '(';
  if (!bare) out += '(';
  print_sum(out, x.node());
  if (!bare) out += ')';
  out += atom.kind == AtomKind::FloorDiv ? " // " : " % ";
  out += std::to_string(atom.divisor);
  if (parenthesize) out += ')';
}

// One term without its sign. A division binds as loosely as `*` and less
// than unary minus, so next to another factor or after a leading `-` it
// needs parentheses: `2*(x // 2)`, `-(x % 4)`, while `y - x // 2` needs none.
void print_term(std::string& out, const SizeTerm& t, bool after_unary_minus) {
  int64_t magnitude = std::abs(t.coeff);
  bool number = magnitude != 1 || t.factors.empty();
  if (number) out += std::to_string(magnitude);
  int64_t items = number ? 1 : 0;
  for (const SizeFactor& f : t.factors)
    items += f.exp;
  bool first = !number;
  for (const SizeFactor& f : t.factors) {
    for (int64_t k = 0; k < f.exp; ++k) {
      if (!first) out += '*';
      first = false;
      print_atom(out, *f.atom, is_division(*f.atom) && (items > 1 || after_unary_minus));
    }
  }
}

// Negative coefficients print as subtraction: `h - 3`, not `h + -3`.
void print_sum(std::string& out, const SizeExprNode& node) {
  if (node.terms.empty()) {
    out += '0';
    return;
  }
  for (size_t i = 0; i < node.terms.size(); ++i) {
    bool negative = node.terms[i].coeff < 0;
    out += i > 0 ? (negative ? " - " : " + ") : (negative ? "-" : "");
    print_term(out, node.terms[i], i == 0 && negative);
  }
}

}  // namespace

SizeExpr::SizeExpr() : SizeExpr(int64_t(0)) {}

SizeExpr::SizeExpr(int64_t value) {
  KILN_CHECK_VALUE(value != INT64_MIN, "size expression: ", value,
                   " is out of range (sizes stay within +-(2^63 - 1))");
  std::vector<SizeTerm> terms;
  if (value != 0) terms.push_back({value, {}});
  node_ = make_sum(std::move(terms)).node_;
}

SizeExpr SizeExpr::symbol(std::string_view name) {
  KILN_CHECK_VALUE(is_identifier(name), "SizeExpr::symbol: '", name,
                   "' is not an identifier [A-Za-z_][A-Za-z0-9_]*");
  KILN_CHECK_VALUE(name != "max" && name != "min", "SizeExpr::symbol: '", name,
                   "' is reserved for the function ", name, "(a, b)");
  return atom_expr({AtomKind::Symbol, std::string(name), {}, 0, 0, 1});
}

namespace {

bool nonnegative_node(const SizeExprNode& node);

// Sizes are never negative, so a symbol is not; floordiv and mod by a
// positive divisor, max and min keep a nonnegative argument so.
bool nonnegative_atom(const SizeAtom& atom) {
  switch (atom.kind) {
    case AtomKind::Symbol:
      return true;
    case AtomKind::FloorDiv:
      return nonnegative_node(atom.args[0].node());
    case AtomKind::Mod:
      return true;  // Python's % by a positive divisor
    case AtomKind::Max:
      return std::any_of(atom.args.begin(), atom.args.end(),
                         [](const SizeExpr& a) { return nonnegative_node(a.node()); });
    case AtomKind::Min:
      return std::all_of(atom.args.begin(), atom.args.end(),
                         [](const SizeExpr& a) { return nonnegative_node(a.node()); });
  }
  return false;
}

bool nonnegative_node(const SizeExprNode& node) {
  for (const SizeTerm& t : node.terms) {
    if (t.coeff < 0) return false;
    for (const SizeFactor& f : t.factors) {
      if (!nonnegative_atom(*f.atom)) return false;
    }
  }
  return true;
}

}  // namespace

bool SizeExpr::provably_nonnegative() const {
  return nonnegative_node(*node_);
}

bool SizeExpr::is_constant() const {
  return node_->terms.empty() || (node_->terms.size() == 1 && node_->terms[0].factors.empty());
}

int64_t SizeExpr::constant() const {
  KILN_CHECK_VALUE(is_constant(), "size expression ", *this, " is not a constant");
  return node_->terms.empty() ? 0 : node_->terms[0].coeff;
}

std::vector<std::string> SizeExpr::symbols() const {
  std::set<std::string> out;
  collect_symbols(*node_, out);
  return {out.begin(), out.end()};
}

int64_t SizeExpr::evaluate(const std::map<std::string, int64_t>& bindings) const {
  return evaluate([&](const std::string& name) {
    auto it = bindings.find(name);
    return it == bindings.end() ? std::nullopt : std::optional<int64_t>(it->second);
  });
}

int64_t SizeExpr::evaluate(const SymbolLookup& lookup) const {
  return eval_node(*node_, lookup, *this);
}

SizeExpr SizeExpr::substitute(const std::map<std::string, SizeExpr>& bindings) const {
  if (bindings.empty()) return *this;
  SizeExpr sum;
  for (const SizeTerm& t : node_->terms) {
    SizeExpr product(t.coeff);
    for (const SizeFactor& f : t.factors) {
      SizeExpr value = substitute_atom(*f.atom, bindings);
      for (int64_t k = 0; k < f.exp; ++k)
        product = product * value;
    }
    sum = sum + product;
  }
  return sum;
}

std::string SizeExpr::to_string() const {
  std::string out;
  print_sum(out, *node_);
  return out;
}

bool operator==(const SizeExpr& a, const SizeExpr& b) {
  if (a.node_ == b.node_) return true;
  return a.hash() == b.hash() && compare_nodes(*a.node_, *b.node_) == 0;
}

std::strong_ordering operator<=>(const SizeExpr& a, const SizeExpr& b) {
  return compare_nodes(*a.node_, *b.node_) <=> 0;
}

size_t SizeExpr::hash() const {
  return node_->hash;
}

std::ostream& operator<<(std::ostream& os, const SizeExpr& e) {
  return os << e.to_string();
}

SizeExpr operator+(const SizeExpr& a, const SizeExpr& b) {
  if (b.node().terms.empty()) return a;
  if (a.node().terms.empty()) return b;
  std::vector<SizeTerm> terms = a.node().terms;
  terms.insert(terms.end(), b.node().terms.begin(), b.node().terms.end());
  return make_sum(std::move(terms));
}

SizeExpr operator-(const SizeExpr& a) {
  std::vector<SizeTerm> terms = a.node().terms;
  for (SizeTerm& t : terms)
    t.coeff = -t.coeff;  // never INT64_MIN, so this cannot overflow
  return make_sum(std::move(terms));
}

SizeExpr operator-(const SizeExpr& a, const SizeExpr& b) {
  return a + (-b);
}

SizeExpr operator*(const SizeExpr& a, const SizeExpr& b) {
  // Products of sums multiply out: cap the size so that hostile text such
  // as (a + 1)*(b + 1)*... fails fast instead of exhausting memory.
  constexpr size_t kMaxTerms = 4096;
  KILN_CHECK_VALUE(a.node().terms.size() * b.node().terms.size() <= kMaxTerms,
                   "size expression: the product of ", a, " and ", b, " has more than ", kMaxTerms,
                   " terms");
  std::vector<SizeTerm> terms;
  for (const SizeTerm& x : a.node().terms) {
    for (const SizeTerm& y : b.node().terms)
      terms.push_back({mul_i(x.coeff, y.coeff), multiply_factors(x.factors, y.factors)});
  }
  return make_sum(std::move(terms));
}

SizeExpr floordiv(const SizeExpr& a, int64_t d) {
  KILN_CHECK_VALUE(d > 0, "floordiv: the divisor must be positive, got ", a, " // ", d);
  if (d == 1) return a;  // x // 1 = x
  if (a.is_constant()) return floor_div_i(a.constant(), d);
  // Split a = d*q + r, q collecting the terms whose coefficient d divides:
  //   (d*q + r) // d = q + r // d          (d*q is a multiple of d)
  // so (2*x + 5) // 2 = x + 5 // 2 = x + 2 and (6*x + y) // 3 = 2*x + y // 3.
  std::vector<SizeTerm> quotient, rest;
  for (const SizeTerm& t : a.node().terms) {
    if (t.coeff % d == 0) {
      quotient.push_back({t.coeff / d, t.factors});
    } else {
      rest.push_back(t);
    }
  }
  SizeExpr q = make_sum(std::move(quotient));
  if (rest.empty()) return q;
  if (rest.size() == 1 && rest[0].factors.empty()) return q + floor_div_i(rest[0].coeff, d);
  // (g*r) // (g*d) = r // d for g > 0: (2*x + 2) // 4 = (x + 1) // 2.
  d /= cancel_gcd(rest, d);
  SizeExpr r = make_sum(std::move(rest));
  // (x // a + c) // d = (x + a*c) // (a*d) for a, d > 0, because
  //   x // a + c = (x + a*c) // a   and   (y // a) // d = y // (a*d).
  const std::vector<SizeTerm>& rt = r.node().terms;
  const SizeAtom* inner = term_atom(rt[0]);
  bool plus_constant = rt.size() == 2 && rt[1].factors.empty();
  if (inner && inner->kind == AtomKind::FloorDiv && (rt.size() == 1 || plus_constant)) {
    int64_t c = plus_constant ? rt[1].coeff : 0;
    return q + floordiv(inner->args[0] + mul_i(inner->divisor, c), mul_i(inner->divisor, d));
  }
  return q + atom_expr({AtomKind::FloorDiv, "", {r}, d, 0, 1});
}

SizeExpr round_up_coefficients(const SizeExpr& a, int64_t m) {
  KILN_CHECK_VALUE(m > 0, "round_up_coefficients: the multiple must be positive, got ", m);
  std::vector<SizeTerm> terms = a.node().terms;
  for (SizeTerm& t : terms)
    t.coeff = mul_i(-floor_div_i(-t.coeff, m), m);  // ceil(c / m) * m
  return make_sum(std::move(terms));
}

SizeExpr mod(const SizeExpr& a, int64_t d) {
  KILN_CHECK_VALUE(d > 0, "mod: the divisor must be positive, got ", a, " % ", d);
  if (d == 1) return 0;  // x % 1 = 0
  // Every coefficient moves into [0, d):
  //   (c*m + r) % d = ((c % d)*m + r) % d   (c - c % d is a multiple of d)
  // so terms d divides vanish and (x - 1) % 4 becomes (x + 3) % 4.
  std::vector<SizeTerm> rest;
  for (const SizeTerm& t : a.node().terms) {
    if (int64_t c = mod_i(t.coeff, d)) rest.push_back({c, t.factors});
  }
  if (rest.empty()) return 0;
  if (rest.size() == 1 && rest[0].factors.empty()) return rest[0].coeff;  // already in [0, d)
  // (g*r) % (g*d) = g*(r % d) for g > 0: (2*x + 2) % 4 = 2*((x + 1) % 2).
  if (int64_t g = cancel_gcd(rest, d); g > 1) return g * mod(make_sum(std::move(rest)), d / g);
  SizeExpr r = make_sum(std::move(rest));
  // With 0 <= x % a < a:
  //   (x % a) % d = x % a   when a <= d   (already in [0, d))
  //   (x % a) % d = x % d   when d | a    (x % a = x - a*k, a*k a multiple of d)
  const SizeAtom* inner = lone_atom(r);
  if (inner && inner->kind == AtomKind::Mod) {
    if (inner->divisor <= d) return r;
    if (inner->divisor % d == 0) return mod(inner->args[0], d);
  }
  return atom_expr({AtomKind::Mod, "", {r}, d, 0, 1});
}

SizeExpr max(const SizeExpr& a, const SizeExpr& b) {
  return extremum(AtomKind::Max, a, b);
}
SizeExpr min(const SizeExpr& a, const SizeExpr& b) {
  return extremum(AtomKind::Min, a, b);
}

namespace {

// The term t / d when d's monomial divides t's and its coefficient t's.
std::optional<SizeTerm> divide_term(const SizeTerm& t, const SizeTerm& d) {
  if (t.coeff % d.coeff != 0) return std::nullopt;
  // The term's factors minus the divisor's, each exponent at least as high.
  std::vector<SizeFactor> left;
  size_t j = 0;
  for (const SizeFactor& f : t.factors) {
    if (j < d.factors.size() && compare_atoms(*f.atom, *d.factors[j].atom) == 0) {
      int64_t exp = f.exp - d.factors[j++].exp;
      if (exp < 0) return std::nullopt;
      if (exp > 0) left.push_back({f.atom, exp});
      continue;
    }
    left.push_back(f);
  }
  if (j != d.factors.size()) return std::nullopt;
  return SizeTerm{t.coeff / d.coeff, std::move(left)};
}

}  // namespace

// Long division: terms are sorted highest degree first (a monomial order),
// so the first term of what remains, over b's first, is the next term of
// the quotient; b divides a when nothing remains. 1024*n + 1024 over n + 1
// is 1024, with n an atom as any other ((w - 1) // 8).
std::optional<SizeExpr> exact_divide(const SizeExpr& a, const SizeExpr& b) {
  const std::vector<SizeTerm>& bt = b.node().terms;
  if (bt.empty()) return std::nullopt;
  constexpr int kMaxSteps = 64;  // each step removes a's leading term; a bound for safety
  std::vector<SizeTerm> quotient;
  SizeExpr rest = a;
  for (int step = 0; !rest.node().terms.empty(); ++step) {
    if (step == kMaxSteps) return std::nullopt;
    std::optional<SizeTerm> next = divide_term(rest.node().terms[0], bt[0]);
    if (!next) return std::nullopt;
    quotient.push_back(*next);
    rest = rest - make_sum({std::move(*next)}) * b;
  }
  return make_sum(std::move(quotient));
}

}  // namespace kiln
