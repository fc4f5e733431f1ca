// ONNX translations of libm's functions (ops/elementwise_math_ops.cpp).
// Integer and bool inputs compute in the output's float type, as in kiln.
//
//   tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh, erf,
//   reciprocal                 -> the ONNX op of the same name (declared in
//                                 their OpDefs: export_generic.cpp)
//   log2, log10                -> Log(x) / ln 2, / ln 10
//   erfc                       -> 1 - Erf(x) (absolute, not relative,
//                                 accuracy in the far tail)
//   log1p                      -> x log(u) / (u - 1), u = 1 + x (Goldberg:
//                                 exact where 1 + x rounds)
//   expm1                      -> (u - 1) x / log(u), u = e^x (Kahan)
//   atan2(y, x)                -> atan(|y| / |x|) moved to the quadrant of
//                                 the signs (signed zeros included)
//   hypot(x, y)                -> m sqrt(1 + (s / m)^2), m the larger
//                                 magnitude (no overflow), inf beats NaN
//   logaddexp(a, b)            -> max + log1p(e^-|a - b|); a at equal
//                                 infinities
#include <cmath>
#include <numbers>

#include "kiln/onnx/export_context.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using jit::Node;
using Table = std::unordered_map<std::string, ExportFn>;

DType out_dtype(const Node& node) {
  return node.output()->dtype();
}

std::string operand(const Node& node, size_t i, ExportContext& c) {
  return c.as_dtype(node.input(i), out_dtype(node));
}

template <int Base>
void log_base(const Node& node, ExportContext& c) {
  std::string log = c.temp("Log", {operand(node, 0, c)});
  c.node_for(node.output(), "Div", {log, c.scalar(std::log(double(Base)), out_dtype(node))});
}

void erfc(const Node& node, ExportContext& c) {
  std::string erf = c.temp("Erf", {operand(node, 0, c)});
  c.node_for(node.output(), "Sub", {c.scalar(1.0, out_dtype(node)), erf});
}

std::string is_pos_inf(const std::string& x, ExportContext& c) {
  pb::NodeProto* made = nullptr;
  std::string out = c.temp("IsInf", {x}, &made);
  set_attr(*made, "detect_negative", int64_t(0));
  return out;
}

// log1p(x) = x where 1 + x rounds to 1, log(u) at u = +inf, else
// (x / (u - 1)) log(u): the rounding of u cancels.
std::string log1p_of(const std::string& x, DType t, ExportContext& c) {
  std::string u = c.temp("Add", {c.scalar(1.0, t), x});
  std::string log = c.temp("Log", {u});
  std::string ratio = c.temp("Div", {x, c.temp("Sub", {u, c.scalar(1.0, t)})});
  std::string general = c.temp("Mul", {ratio, log});
  general = c.temp("Where", {is_pos_inf(u, c), log, general});
  return c.temp("Where", {c.temp("Equal", {u, c.scalar(1.0, t)}), x, general});
}

void log1p(const Node& node, ExportContext& c) {
  c.node_for(node.output(), "Identity", {log1p_of(operand(node, 0, c), out_dtype(node), c)});
}

// expm1(x) = x where e^x rounds to 1, -1 where e^x - 1 does, e^x where it
// is +inf, else (u - 1) (x / log(u)).
void expm1(const Node& node, ExportContext& c) {
  DType t = out_dtype(node);
  std::string x = operand(node, 0, c);
  std::string u = c.temp("Exp", {x});
  std::string less_one = c.temp("Sub", {u, c.scalar(1.0, t)});
  std::string general = c.temp("Mul", {less_one, c.temp("Div", {x, c.temp("Log", {u})})});
  general = c.temp("Where", {is_pos_inf(u, c), u, general});
  std::string minus_one = c.scalar(-1.0, t);
  general = c.temp("Where", {c.temp("Equal", {less_one, minus_one}), minus_one, general});
  c.node_for(node.output(), "Where", {c.temp("Equal", {u, c.scalar(1.0, t)}), x, general});
}

// The sign bit: x < 0, or 1 / x < 0 for -0 (NaN: false).
std::string sign_bit(const std::string& x, DType t, ExportContext& c) {
  std::string zero = c.scalar(0.0, t);
  return c.temp("Or",
                {c.temp("Less", {x, zero}), c.temp("Less", {c.temp("Reciprocal", {x}), zero})});
}

void atan2(const Node& node, ExportContext& c) {
  DType t = out_dtype(node);
  std::string y = operand(node, 0, c), x = operand(node, 1, c);
  std::string ay = c.temp("Abs", {y}), ax = c.temp("Abs", {x});
  std::string zero = c.scalar(0.0, t);
  // The angle of (|x|, |y|) in [0, pi / 2]: 0 at the origin, pi / 4 at
  // (inf, inf), where |y| / |x| has none.
  std::string angle = c.temp("Atan", {c.temp("Div", {ay, ax})});
  std::string both_inf = c.temp("And", {c.temp("IsInf", {ax}), c.temp("IsInf", {ay})});
  angle = c.temp("Where", {both_inf, c.scalar(std::numbers::pi / 4, t), angle});
  std::string origin = c.temp("And", {c.temp("Equal", {ax, zero}), c.temp("Equal", {ay, zero})});
  angle = c.temp("Where", {origin, zero, angle});
  // x's sign bit mirrors it to pi - angle; y's negates it.
  std::string mirrored = c.temp("Sub", {c.scalar(std::numbers::pi, t), angle});
  angle = c.temp("Where", {sign_bit(x, t, c), mirrored, angle});
  c.node_for(node.output(), "Where", {sign_bit(y, t, c), c.temp("Neg", {angle}), angle});
}

// The larger and the smaller of two magnitudes, compared (not Max / Min) so
// that a NaN lands in the larger: the result is then NaN.
void hypot(const Node& node, ExportContext& c) {
  DType t = out_dtype(node);
  std::string ax = c.temp("Abs", {operand(node, 0, c)});
  std::string ay = c.temp("Abs", {operand(node, 1, c)});
  std::string x_larger = c.temp("Greater", {ax, ay});
  std::string large = c.temp("Where", {x_larger, ax, ay});
  std::string small = c.temp("Where", {x_larger, ay, ax});
  std::string ratio = c.temp("Div", {small, large});
  std::string root =
      c.temp("Sqrt", {c.temp("Add", {c.scalar(1.0, t), c.temp("Mul", {ratio, ratio})})});
  std::string result = c.temp("Mul", {large, root});
  std::string zero = c.scalar(0.0, t);
  result = c.temp("Where", {c.temp("Equal", {large, zero}), zero, result});
  std::string any_inf = c.temp("Or", {c.temp("IsInf", {ax}), c.temp("IsInf", {ay})});
  c.node_for(node.output(), "Where", {any_inf, c.scalar(HUGE_VAL, t), result});
}

void logaddexp(const Node& node, ExportContext& c) {
  DType t = out_dtype(node);
  std::string a = operand(node, 0, c), b = operand(node, 1, c);
  std::string larger = c.temp("Where", {c.temp("Less", {a, b}), b, a});
  std::string gap = c.temp("Neg", {c.temp("Abs", {c.temp("Sub", {a, b})})});
  std::string result = c.temp("Add", {larger, log1p_of(c.temp("Exp", {gap}), t, c)});
  std::string same_inf = c.temp("And", {c.temp("IsInf", {a}), c.temp("Equal", {a, b})});
  c.node_for(node.output(), "Where", {same_inf, a, result});
}

}  // namespace

void add_function_exporters(Table& table) {
  table["log2"] = log_base<2>;
  table["log10"] = log_base<10>;
  table["erfc"] = erfc;
  table["log1p"] = log1p;
  table["expm1"] = expm1;
  table["atan2"] = atan2;
  table["hypot"] = hypot;
  table["logaddexp"] = logaddexp;
}

}  // namespace kiln::onnx
