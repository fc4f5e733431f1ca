// SizeExpr (issue 21's size expressions): canonical forms, the text form and
// its parser, evaluation, and a seeded property test against a direct
// evaluation with Python's integer semantics.
#include "kiln/core/size_expr.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <unordered_set>

#include "kiln/util/error.h"

namespace kiln {
namespace {

const SizeExpr a = SizeExpr::symbol("a");
const SizeExpr b = SizeExpr::symbol("b");
const SizeExpr c = SizeExpr::symbol("c");
const SizeExpr x = SizeExpr::symbol("x");
const SizeExpr y = SizeExpr::symbol("y");

// The message of the kiln::Error that `f` throws, or "" when it does not.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SizeExprCanonical, RingLaws) {
  SizeExpr batch = SizeExpr::symbol("batch"), seq = SizeExpr::symbol("seq");
  EXPECT_EQ(batch * seq, seq * batch);
  EXPECT_EQ((x + 1) - 1, x);
  EXPECT_EQ(a + b, b + a);
  EXPECT_EQ((a + b) + c, a + (b + c));
  EXPECT_EQ((a * b) * c, a * (b * c));
  EXPECT_EQ(2 * (a + b), 2 * a + 2 * b);
  EXPECT_EQ((a + b) * (a - b), a * a - b * b);
  EXPECT_EQ(x + x, 2 * x);
  EXPECT_EQ(x - x, 0);
  EXPECT_EQ(-(-x), x);
  EXPECT_EQ(x * 0, 0);
  EXPECT_EQ(x * 1, x);
  EXPECT_EQ(SizeExpr(3) * 4 - 2, 10);
  EXPECT_NE(a, b);
  EXPECT_NE(x * x, 2 * x);
  EXPECT_TRUE((x - x).is_constant());
  EXPECT_EQ(SizeExpr(), 0);
}

TEST(SizeExprCanonical, FloorDiv) {
  EXPECT_EQ(floordiv(SizeExpr(7), 2), 3);
  EXPECT_EQ(floordiv(SizeExpr(-7), 2), -4);  // floor, as Python
  EXPECT_EQ(floordiv(x, 1), x);
  EXPECT_EQ(floordiv(2 * x + 4, 2), x + 2);
  EXPECT_EQ(floordiv(2 * x + 5, 2), x + 2);  // 2*x is even for every integer x
  EXPECT_EQ(floordiv(2 * x - 1, 2), x - 1);
  EXPECT_EQ(floordiv(6 * x + y + 3, 3), 2 * x + floordiv(y, 3) + 1);
  EXPECT_EQ(floordiv(6 * x + y + 4, 3), 2 * x + floordiv(y + 4, 3));
  EXPECT_EQ(floordiv(2 * x + 2, 4), floordiv(x + 1, 2));  // common factor cancels
  EXPECT_EQ(floordiv(floordiv(x, 2), 3), floordiv(x, 6));
  EXPECT_EQ(floordiv(floordiv(x, 2) + 1, 3), floordiv(x + 2, 6));
  EXPECT_EQ(floordiv(x * y * 4, 2), 2 * x * y);
  EXPECT_NE(floordiv(x, 2), floordiv(x, 3));
  EXPECT_NE(floordiv(x + 1, 2), floordiv(x, 2));
  EXPECT_EQ(floordiv(x + 1, 2).to_string(), "(x + 1) // 2");
  EXPECT_NE(error_of([] { floordiv(x, 0); }).find("divisor must be positive"), std::string::npos);
  EXPECT_NE(error_of([] { floordiv(x, -2); }).find("x // -2"), std::string::npos);
}

TEST(SizeExprCanonical, Mod) {
  EXPECT_EQ(mod(SizeExpr(-7), 3), 2);  // the divisor's sign, as Python
  EXPECT_EQ(mod(x, 1), 0);
  EXPECT_EQ(mod(4 * x, 4), 0);
  EXPECT_EQ(mod(4 * x + y + 5, 4), mod(y + 1, 4));
  EXPECT_EQ(mod(x - 1, 4), mod(x + 3, 4));
  EXPECT_EQ(mod(2 * x + 2, 4), 2 * mod(x + 1, 2));
  EXPECT_EQ(mod(mod(x, 6), 3), mod(x, 3));  // 3 divides 6
  EXPECT_EQ(mod(mod(x, 3), 6), mod(x, 3));  // x % 3 is already in [0, 6)
  EXPECT_EQ(mod(5 * mod(x, 3), 4), mod(x, 3));
  EXPECT_EQ(mod(mod(x, 6), 4).to_string(), "(x % 6) % 4");
  EXPECT_NE(error_of([] { mod(x, 0); }).find("mod: the divisor must be positive"),
            std::string::npos);
}

TEST(SizeExprCanonical, MaxMin) {
  EXPECT_EQ(max(SizeExpr(3), SizeExpr(5)), 5);
  EXPECT_EQ(min(SizeExpr(3), SizeExpr(-5)), -5);
  EXPECT_EQ(max(x, x), x);
  EXPECT_EQ(max(x + 1, x), x + 1);
  EXPECT_EQ(min(x + 1, x), x);
  EXPECT_EQ(min(x, x - 2), x - 2);
  EXPECT_EQ(max(a, b), max(b, a));
  EXPECT_EQ(max(max(a, b), c), max(a, max(b, c)));
  EXPECT_EQ(max(max(x, 1), 2), max(x, 2));
  EXPECT_EQ(max(max(a, b), a), max(a, b));
  EXPECT_NE(max(a, b), min(a, b));
  EXPECT_NE(max(min(a, b), c), min(max(a, b), c));
  EXPECT_EQ(max(a, b) - max(b, a), 0);
}

TEST(SizeExprCanonical, OrderAndHash) {
  std::vector<SizeExpr> es = {0,         1,         -1,        a,        b,
                              a * b,     a + b,     a - b,     a * a,    floordiv(a, 2),
                              mod(a, 2), max(a, b), min(a, b), 2 * a + 1};
  std::set<SizeExpr> ordered(es.begin(), es.end());
  EXPECT_EQ(ordered.size(), es.size());
  std::unordered_set<SizeExpr> hashed(es.begin(), es.end());
  EXPECT_EQ(hashed.size(), es.size());
  for (const SizeExpr& e : es) {
    EXPECT_FALSE(e < e);
    for (const SizeExpr& f : es)
      EXPECT_EQ(e == f, !(e < f) && !(f < e)) << e << " vs " << f;
  }
  EXPECT_EQ(std::hash<SizeExpr>()(b * a + 1), std::hash<SizeExpr>()(1 + a * b));
  EXPECT_EQ(hashed.count(b * a), 1u);
  EXPECT_EQ(ordered.count(1 + 2 * a), 1u);
}

TEST(SizeExprPrint, EveryShape) {
  SizeExpr batch = SizeExpr::symbol("batch"), seq = SizeExpr::symbol("seq");
  SizeExpr h = SizeExpr::symbol("h");
  std::vector<std::pair<SizeExpr, std::string>> cases = {
      {0, "0"},
      {-5, "-5"},
      {batch, "batch"},
      {batch * seq, "batch*seq"},
      {seq * batch, "batch*seq"},
      {2 * batch + 1, "2*batch + 1"},
      {1 + batch * 2, "2*batch + 1"},
      {floordiv(h - 3, 2) + 1, "(h - 3) // 2 + 1"},
      {mod(batch, 4), "batch % 4"},
      {max(a, b), "max(a, b)"},
      {min(b, a), "min(a, b)"},
      {max(max(a, b), c), "max(a, b, c)"},
      {h - 3, "h - 3"},
      {-x, "-x"},
      {3 - x, "-x + 3"},
      {-2 * x * y, "-2*x*y"},
      {x * x, "x*x"},
      {a * a - b * b, "a*a - b*b"},
      {x * x * y + x * y * y + x, "x*x*y + x*y*y + x"},
      {floordiv(-x, 2), "(-x) // 2"},
      {floordiv(2 * x, 3), "2*x // 3"},
      {-floordiv(x, 2), "-(x // 2)"},
      {2 * floordiv(x, 2), "2*(x // 2)"},
      {y * mod(x, 4), "y*(x % 4)"},
      {y - floordiv(x, 2), "y - x // 2"},
      {floordiv(x, 2) * floordiv(x, 2), "(x // 2)*(x // 2)"},
      {mod(mod(x, 6), 4), "(x % 6) % 4"},
      {floordiv(2 * floordiv(x, 3) + y, 5), "(y + 2*(x // 3)) // 5"},
      {min(a, b) - 1, "min(a, b) - 1"},
      {-max(a, b), "-max(a, b)"},
      {max(floordiv(a, 2), b + 1), "max(b + 1, a // 2)"},
  };
  for (const auto& [e, text] : cases) {
    EXPECT_EQ(e.to_string(), text);
    EXPECT_EQ(str(e), text);
    EXPECT_EQ(parse_size_expr(text), e) << text;
  }
}

TEST(SizeExprParse, PythonPrecedence) {
  auto value = [](std::string_view text) { return parse_size_expr(text).constant(); };
  EXPECT_EQ(value("1 + 2 * 3"), 7);
  EXPECT_EQ(value("10 - 3 - 2"), 5);
  EXPECT_EQ(value("-3 // 2"), -2);  // (-3) // 2
  EXPECT_EQ(value("-(3 // 2)"), -1);
  EXPECT_EQ(value("7 % 3 * 2"), 2);
  EXPECT_EQ(value("2 * 7 % 3"), 2);
  EXPECT_EQ(value("-7 % 3"), 2);
  EXPECT_EQ(value("100 // 7 // 2"), 7);
  EXPECT_EQ(value("--4"), 4);
  EXPECT_EQ(value("max(1, min(5, 3), 2)"), 3);
  EXPECT_EQ(value("9223372036854775807"), INT64_MAX);
  EXPECT_EQ(parse_size_expr("  batch*seq "), parse_size_expr("seq * batch"));
  EXPECT_EQ(parse_size_expr("-a*b"), -(a * b));
  EXPECT_EQ(parse_size_expr("a - b - c"), a - b - c);
  EXPECT_EQ(parse_size_expr("x // (2 * 3)"), floordiv(x, 6));
  EXPECT_EQ(parse_size_expr("max (a,b)"), max(a, b));
  EXPECT_EQ(parse_size_expr("_tmp1 + B"), SizeExpr::symbol("_tmp1") + SizeExpr::symbol("B"));
}

TEST(SizeExprParse, ErrorsNameTextAndPosition) {
  std::vector<std::pair<std::string, std::string>> cases = {
      {"", "expected a size but found end of input at position 0 in ''"},
      {"batch +", "expected a size but found end of input at position 7"},
      {"(h - 3", "expected ')' but found end of input at position 6 in '(h - 3'"},
      {"h // 0", "divisor of '//' must be a positive integer constant, got 0 at position 5"},
      {"h % y", "divisor of '%' must be a positive integer constant, got y at position 4"},
      {"h // -2", "got -2 at position 5"},
      {"h / 2", "'/' is true division; sizes use floor division '//' at position 2"},
      {"2 ** 3", "'**' is not supported in a size expression at position 2"},
      {"max(a)", "'max' needs at least two arguments at position 0"},
      {"1 + min", "'min' is a function: write min(a, b) at position 4"},
      {"a b", "unexpected 'b' at position 2"},
      {"2x", "unexpected 'x' after the number at position 1"},
      {"a + #", "expected a size but found '#' at position 4"},
      {"a\n", "unexpected byte 0x0a at position 1"},
      {"max(a, b", "expected ')' but found end of input at position 8"},
      {"a)", "unexpected ')' at position 1"},
      {"9223372036854775808", "integer literal is out of int64 range at position 0"},
      {std::string(500, '(') + "x" + std::string(500, ')'), "nested deeper than 200"},
      {std::string(500, '-') + "x", "nested deeper than 200"},
  };
  for (const auto& [text, message] : cases) {
    std::string error = error_of([&] { parse_size_expr(text); });
    EXPECT_NE(error.find(message), std::string::npos) << "'" << text << "' gave: " << error;
    EXPECT_EQ(error.rfind("parse_size_expr: ", 0), 0u) << error;
  }
  try {
    parse_size_expr("h // 0");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Value);
  }
}

TEST(SizeExprParse, HostileNestingIsAnError) {
  // Flat text, deep atoms: each % keeps the previous one inside.
  std::string text = "x";
  for (int d = 100000; d > 98000; --d)
    text += " % " + std::to_string(d);
  EXPECT_NE(error_of([&] { parse_size_expr(text); }).find("nest more than 1000 deep"),
            std::string::npos);
}

TEST(SizeExprQuery, ConstantSymbolsEvaluate) {
  SizeExpr batch = SizeExpr::symbol("batch"), seq = SizeExpr::symbol("seq");
  EXPECT_TRUE(SizeExpr(4).is_constant());
  EXPECT_EQ(SizeExpr(4).constant(), 4);
  EXPECT_FALSE(batch.is_constant());
  EXPECT_NE(error_of([&] {
              (batch * seq).constant();
            }).find("size expression batch*seq is not a constant"),
            std::string::npos);
  SizeExpr e = max(floordiv(seq - 3, 2), mod(batch, 4)) + c * seq;
  EXPECT_EQ(e.symbols(), (std::vector<std::string>{"batch", "c", "seq"}));
  EXPECT_TRUE(SizeExpr(3).symbols().empty());

  EXPECT_EQ((batch * seq).evaluate({{"batch", 8}, {"seq", 128}}), 1024);
  EXPECT_EQ((floordiv(x - 3, 2) + 1).evaluate({{"x", 0}}), -1);
  EXPECT_EQ(mod(x, 4).evaluate({{"x", -1}}), 3);
  EXPECT_EQ(max(a, b).evaluate({{"a", -2}, {"b", -7}}), -2);
  EXPECT_EQ(min(a, b).evaluate([](const std::string& name) -> std::optional<int64_t> {
    return name == "a" ? 5 : 9;
  }),
            5);
  EXPECT_EQ((x * x * x).evaluate({{"x", -3}}), -27);
  EXPECT_EQ(error_of([&] {
              (batch * seq).evaluate({{"batch", 8}});
            }),
            "evaluate: symbol 'seq' is unbound in batch*seq");
  EXPECT_NE(error_of([&] {
              (x * x).evaluate({{"x", int64_t(1) << 40}});
            }).find("overflows int64"),
            std::string::npos);
}

TEST(SizeExprQuery, Substitute) {
  SizeExpr batch = SizeExpr::symbol("batch"), seq = SizeExpr::symbol("seq");
  SizeExpr t = SizeExpr::symbol("t");
  EXPECT_EQ((batch * seq).substitute({{"seq", 2 * t}}), 2 * batch * t);
  EXPECT_EQ((batch * seq).substitute({{"seq", 0}}), 0);
  EXPECT_EQ(floordiv(x + 1, 2).substitute({{"x", 2 * y + 1}}), y + 1);
  EXPECT_EQ(max(a, b).substitute({{"b", a + 1}}), a + 1);
  EXPECT_EQ((x * x).substitute({{"x", a - 1}}), a * a - 2 * a + 1);
  EXPECT_EQ(mod(x, 3).substitute({{"y", 1}}), mod(x, 3));
  EXPECT_EQ(floordiv(x - 3, 2).substitute({{"x", 10}}), 3);
}

TEST(SizeExprQuery, SymbolNamesAndRange) {
  EXPECT_NE(error_of([] { SizeExpr::symbol("1x"); }).find("'1x' is not an identifier"),
            std::string::npos);
  EXPECT_NE(error_of([] { SizeExpr::symbol(""); }).find("not an identifier"), std::string::npos);
  EXPECT_NE(error_of([] { SizeExpr::symbol("max"); }).find("reserved"), std::string::npos);
  EXPECT_NE(error_of([] { SizeExpr(INT64_MIN); }).find("out of range"), std::string::npos);
  EXPECT_NE(error_of([] { SizeExpr(INT64_MAX) + 1; }).find("overflows int64"), std::string::npos);
  EXPECT_EQ(max(SizeExpr(INT64_MAX), SizeExpr(-INT64_MAX)), INT64_MAX);
  SizeExpr big = -INT64_MAX * x;
  EXPECT_EQ(parse_size_expr(big.to_string()), big);
}

// ---- Property test: random expressions against a direct evaluation ---------

// A random expression as a plain tree, evaluated directly on integers with
// Python's semantics (the oracle), and built through SizeExpr.
struct Tree {
  enum Op { Const, Sym, Add, Sub, Neg, Mul, FloorDiv, Mod, Max, Min } op;
  int64_t value = 0;  // Const: the value; Sym: an index into kNames; FloorDiv, Mod: the divisor
  std::shared_ptr<const Tree> l, r;
};
using TreePtr = std::shared_ptr<const Tree>;

const char* const kNames[] = {"a", "b", "c"};

int pick(std::mt19937& rng, int n) {
  return std::uniform_int_distribution<int>(0, n - 1)(rng);
}

TreePtr leaf(std::mt19937& rng, bool constant) {
  auto t = std::make_shared<Tree>();
  t->op = constant ? Tree::Const : Tree::Sym;
  t->value = constant ? pick(rng, 7) - 3 : pick(rng, 3);
  return t;
}

// `divisions` biases the trees towards chains of // and % whose other
// operands are constants, where the nesting rules fire: ((a // 2 + 1) // 3) % 4.
TreePtr random_tree(std::mt19937& rng, int depth, bool divisions = false) {
  if (depth == 0 || pick(rng, 5) == 0) return leaf(rng, pick(rng, 3) == 0);
  auto t = std::make_shared<Tree>();
  const Tree::Op division_ops[] = {Tree::FloorDiv, Tree::FloorDiv, Tree::Mod, Tree::Mod,
                                   Tree::Add,      Tree::Sub,      Tree::Mul, Tree::Max};
  t->op = divisions ? division_ops[pick(rng, 8)] : static_cast<Tree::Op>(Tree::Add + pick(rng, 8));
  t->l = random_tree(rng, depth - 1, divisions);
  if (t->op == Tree::FloorDiv || t->op == Tree::Mod) {
    const int64_t divisors[] = {1, 2, 3, 4, 6, 8};
    t->value = divisors[pick(rng, 6)];
  } else if (t->op != Tree::Neg) {
    t->r =
        divisions && pick(rng, 3) != 0 ? leaf(rng, true) : random_tree(rng, depth - 1, divisions);
  }
  return t;
}

// Python's integer semantics; nothing on overflow (the sample is skipped).
std::optional<int64_t> oracle(const Tree& t, const std::map<std::string, int64_t>& env) {
  if (t.op == Tree::Const) return t.value;
  if (t.op == Tree::Sym) return env.at(kNames[t.value]);
  std::optional<int64_t> l = oracle(*t.l, env);
  std::optional<int64_t> r = t.r ? oracle(*t.r, env) : std::optional<int64_t>(0);
  if (!l || !r) return std::nullopt;
  int64_t out = 0;
  switch (t.op) {
    case Tree::Add:
      if (__builtin_add_overflow(*l, *r, &out)) return std::nullopt;
      return out;
    case Tree::Sub:
      if (__builtin_sub_overflow(*l, *r, &out)) return std::nullopt;
      return out;
    case Tree::Neg:
      return -*l;
    case Tree::Mul:
      if (__builtin_mul_overflow(*l, *r, &out)) return std::nullopt;
      return out;
    case Tree::FloorDiv:
      return *l / t.value - ((*l % t.value != 0 && *l < 0) ? 1 : 0);
    case Tree::Mod:
      return ((*l % t.value) + t.value) % t.value;
    case Tree::Max:
      return std::max(*l, *r);
    case Tree::Min:
      return std::min(*l, *r);
    default:
      return std::nullopt;
  }
}

SizeExpr build(const Tree& t) {
  switch (t.op) {
    case Tree::Const:
      return t.value;
    case Tree::Sym:
      return SizeExpr::symbol(kNames[t.value]);
    case Tree::Add:
      return build(*t.l) + build(*t.r);
    case Tree::Sub:
      return build(*t.l) - build(*t.r);
    case Tree::Neg:
      return -build(*t.l);
    case Tree::Mul:
      return build(*t.l) * build(*t.r);
    case Tree::FloorDiv:
      return floordiv(build(*t.l), t.value);
    case Tree::Mod:
      return mod(build(*t.l), t.value);
    case Tree::Max:
      return max(build(*t.l), build(*t.r));
    case Tree::Min:
      return min(build(*t.l), build(*t.r));
  }
  return 0;
}

// The same algebra built another way, each choice an identity the canonical
// form must see: operands swapped, a - b as a + (-1)*b, distributivity
// folded in, x % d as (x + d*r) % d, and x // d as (x + d*z*r) // d - z*r
// (z is in no tree, so no like terms merge with x).
SizeExpr build_other(const Tree& t, std::mt19937& rng) {
  auto other = [&](const TreePtr& p) { return build_other(*p, rng); };
  bool flip = pick(rng, 2) == 0;
  switch (t.op) {
    case Tree::Const:
      return SizeExpr(t.value + 1) - 1;
    case Tree::Sym:
      return SizeExpr::symbol(kNames[t.value]);
    case Tree::Add:
      return other(t.r) + other(t.l);
    case Tree::Sub:
      return flip ? -(other(t.r) - other(t.l)) : other(t.l) + SizeExpr(-1) * other(t.r);
    case Tree::Neg:
      return flip ? 0 - other(t.l) : other(t.l) * -1;
    case Tree::Mul: {
      if (flip) return other(t.r) * other(t.l);
      SizeExpr extra = build(*random_tree(rng, 2));
      return (other(t.l) + extra) * other(t.r) - other(t.r) * extra;
    }
    case Tree::FloorDiv: {
      SizeExpr shift = SizeExpr::symbol("z") * build(*random_tree(rng, 1));
      return floordiv(other(t.l) + t.value * shift, t.value) - shift;
    }
    case Tree::Mod:
      return mod(other(t.l) + t.value * build(*random_tree(rng, 2)), t.value);
    case Tree::Max:
      return flip ? max(other(t.r), other(t.l)) : max(other(t.l), max(other(t.r), other(t.l)));
    case Tree::Min:
      return flip ? min(other(t.r), other(t.l)) : min(other(t.l), min(other(t.r), other(t.l)));
  }
  return 0;
}

// Checks, for `count` random trees: (1) the canonical form evaluates as the
// tree does, at bindings with negative and zero values too; (2) the text
// reads back to the same form and value; (3) another build order of the same
// algebra gives the same form and hash. Returns how many bindings were checked.
int check_random_expressions(uint32_t seed, int count, int depth, bool divisions) {
  std::mt19937 rng(seed);
  int checked = 0;
  for (int i = 0; i < count; ++i) {
    TreePtr tree = random_tree(rng, depth, divisions);
    SizeExpr e = build(*tree);
    std::string text = e.to_string();
    SCOPED_TRACE(text);
    SizeExpr reparsed = parse_size_expr(text);
    EXPECT_EQ(reparsed, e);  // (2)
    EXPECT_EQ(reparsed.to_string(), text);
    SizeExpr other = build_other(*tree, rng);
    EXPECT_EQ(other, e) << other;  // (3)
    EXPECT_EQ(other.hash(), e.hash());
    for (int k = 0; k < 8; ++k) {
      std::map<std::string, int64_t> env;
      for (const char* name : kNames)
        env[name] = pick(rng, 25) - 12;
      std::optional<int64_t> want = oracle(*tree, env);
      if (!want) continue;  // the direct evaluation overflowed
      ++checked;
      EXPECT_EQ(e.evaluate(env), *want)  // (1)
          << "a=" << env["a"] << " b=" << env["b"] << " c=" << env["c"];
      EXPECT_EQ(reparsed.evaluate(env), *want);
      std::map<std::string, SizeExpr> bound(env.begin(), env.end());
      EXPECT_EQ(e.substitute(bound), *want);
    }
  }
  return checked;
}

TEST(SizeExprProperty, RandomExpressionsMatchPythonSemantics) {
  EXPECT_GT(check_random_expressions(20240521, 600, 4, false), 600 * 8 * 95 / 100);
}

TEST(SizeExprProperty, RandomDivisionChainsMatchPythonSemantics) {
  EXPECT_GT(check_random_expressions(7, 600, 6, true), 600 * 8 * 95 / 100);
}

TEST(SizeExprCanonical, RoundUpCoefficients) {
  const SizeExpr b = SizeExpr::symbol("batch"), s = SizeExpr::symbol("seq");
  EXPECT_EQ(round_up_coefficients(24 * b + 100, 64), 64 * b + 128);
  EXPECT_EQ(round_up_coefficients(128 * b * s + 64, 64), 128 * b * s + 64);  // already multiples
  EXPECT_EQ(round_up_coefficients(SizeExpr(0), 64), SizeExpr(0));
  EXPECT_EQ(round_up_coefficients(SizeExpr(1), 64), SizeExpr(64));
  EXPECT_EQ(round_up_coefficients(-70 * b + 5, 64), -64 * b + 64);  // up, toward +inf
  // At least the value, and a multiple, wherever the symbols are nonnegative.
  const SizeExpr e = 36 * b * s + 5 * b + 3 * floordiv(s, 2) + 1;
  const SizeExpr r = round_up_coefficients(e, 64);
  for (int64_t vb : {0, 1, 3, 50}) {
    for (int64_t vs : {0, 1, 7, 128}) {
      const std::map<std::string, int64_t> at{{"batch", vb}, {"seq", vs}};
      EXPECT_GE(r.evaluate(at), e.evaluate(at));
      EXPECT_EQ(r.evaluate(at) % 64, 0);
    }
  }
  EXPECT_THROW(round_up_coefficients(b, 0), Error);
}

}  // namespace
}  // namespace kiln
