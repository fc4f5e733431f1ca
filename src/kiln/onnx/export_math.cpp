// ONNX translations of the float tests and repairs, the roundings, the
// divisions with a rounding, the bitwise ops, add_scaled, addcmul /
// addcdiv and the masking ops.
//
//   isnan, isinf, isfinite  -> IsNaN, IsInf, Not(Or(..)); integers and bools
//                              are never NaN or infinite: Equal(x, x)
//   nan_to_num              -> Where over IsNaN and IsInf of each sign
//   floor, ceil, round      -> Floor, Ceil, Round (both round half to
//                              even); integers pass through
//   trunc                   -> Where(x < 0, Ceil(x), Floor(x))
//   sign                    -> Sign for integers, (0 < x) - (x < 0) for
//                              floats (0 at NaN); bools pass through
//   fmod                    -> Mod fmod=1 (C's fmod and %)
//   remainder               -> Mod fmod=0 for integers; for floats fmod
//                              moved onto b's side (kernels/cpu/division.h)
//   floor_divide            -> the formulas of kernels/cpu/division.h
//   bitwise_and/or/xor/not  -> And/Or/Xor/Not on bools; ~x = -x - 1 on
//                              signed integers, 255 - x on uint8;
//                              BitwiseAnd & co. need opset 18
//   bitwise_left/right_shift -> BitShift LEFT / RIGHT (uint8 only: ONNX's
//                              BitShift has no signed types)
//   add_scaled              -> Add(a, Mul(alpha, b))
//   masked_fill             -> Where(mask, value, x)
//   triu, tril              -> Trilu (opset 14), else a Where over a
//                              constant mask of the last two dims
#include <cmath>
#include <limits>

#include "kiln/core/factory.h"
#include "kiln/onnx/export_context.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using jit::Node;
using Table = std::unordered_map<std::string, ExportFn>;

bool floating_input(const Node& node) {
  return is_floating(node.input(0)->dtype());
}

// A bool tensor of x's shape, all `value` (for the tests integers pass).
void constant_test(const Node& node, ExportContext& c, bool value) {
  std::string x = c.name(node.input(0));
  std::string same = c.temp("Equal", {x, x});
  if (value) {
    c.node_for(node.output(), "Identity", {same});
    return;
  }
  c.node_for(node.output(), "Not", {same});
}

void isnan(const Node& node, ExportContext& c) {
  if (!floating_input(node)) return constant_test(node, c, false);
  c.node_for(node.output(), "IsNaN", {c.name(node.input(0))});
}

void isinf(const Node& node, ExportContext& c) {
  if (!floating_input(node)) return constant_test(node, c, false);
  c.node_for(node.output(), "IsInf", {c.name(node.input(0))});
}

void isfinite(const Node& node, ExportContext& c) {
  if (!floating_input(node)) return constant_test(node, c, true);
  std::string x = c.name(node.input(0));
  std::string special = c.temp("Or", {c.temp("IsNaN", {x}), c.temp("IsInf", {x})});
  c.node_for(node.output(), "Not", {special});
}

// IsInf of one sign.
std::string is_infinity(const std::string& x, bool positive, ExportContext& c) {
  pb::NodeProto* made = nullptr;
  std::string out = c.temp("IsInf", {x}, &made);
  set_attr(*made, "detect_positive", int64_t(positive));
  set_attr(*made, "detect_negative", int64_t(!positive));
  return out;
}

// A replacement given as a double, in the dtype: one beyond its range is
// the infinity of its sign (the kernel's `narrowed`).
std::string replacement(double value, DType dtype, ExportContext& c) {
  double largest = dtype == DType::Float32 ? double(std::numeric_limits<float>::max())
                                           : std::numeric_limits<double>::max();
  if (std::fabs(value) > largest) value = std::copysign(HUGE_VAL, value);
  return c.scalar(value, dtype);
}

void nan_to_num(const Node& node, ExportContext& c) {
  std::string x = c.name(node.input(0));
  if (!floating_input(node)) {
    c.node_for(node.output(), "Identity", {x});
    return;
  }
  const Attrs& a = node.attrs();
  DType dtype = node.output()->dtype();
  double largest = dtype == DType::Float32 ? double(std::numeric_limits<float>::max())
                                           : std::numeric_limits<double>::max();
  std::string posinf = replacement(a.has("posinf") ? a.get_float("posinf") : largest, dtype, c);
  std::string neginf = replacement(a.has("neginf") ? a.get_float("neginf") : -largest, dtype, c);
  std::string result = c.temp("Where", {is_infinity(x, false, c), neginf, x});
  result = c.temp("Where", {is_infinity(x, true, c), posinf, result});
  c.node_for(node.output(), "Where",
             {c.temp("IsNaN", {x}), replacement(a.get_float("nan"), dtype, c), result});
}

template <const char* OpType>
void rounding(const Node& node, ExportContext& c) {
  std::string x = c.name(node.input(0));
  c.node_for(node.output(), floating_input(node) ? OpType : "Identity", {x});
}

constexpr char kFloor[] = "Floor", kCeil[] = "Ceil", kRound[] = "Round";

void trunc(const Node& node, ExportContext& c) {
  std::string x = c.name(node.input(0));
  if (!floating_input(node)) {
    c.node_for(node.output(), "Identity", {x});
    return;
  }
  std::string negative = c.temp("Less", {x, c.scalar(0.0, node.output()->dtype())});
  c.node_for(node.output(), "Where", {negative, c.temp("Ceil", {x}), c.temp("Floor", {x})});
}

// (0 < x) - (x < 0), as kiln's kernel: 0 for NaN, where Sign gives NaN.
void sign(const Node& node, ExportContext& c) {
  std::string x = c.name(node.input(0));
  DType dtype = node.output()->dtype();
  if (dtype == DType::Bool) {
    c.node_for(node.output(), "Identity", {x});
    return;
  }
  if (!is_floating(dtype)) {
    c.node_for(node.output(), "Sign", {x});
    return;
  }
  std::string zero = c.scalar(0.0, dtype);
  std::string above = c.cast(c.temp("Less", {zero, x}), dtype);
  std::string below = c.cast(c.temp("Less", {x, zero}), dtype);
  c.node_for(node.output(), "Sub", {above, below});
}

// ---- divisions with a rounding ----

struct Operands {
  std::string a, b;
  DType dtype;
};

Operands operands(const Node& node, ExportContext& c) {
  DType dtype = node.output()->dtype();
  return {c.as_dtype(node.input(0), dtype), c.as_dtype(node.input(1), dtype), dtype};
}

// An integer divisor of -1 as 1: the most negative value divided by -1
// traps (SIGFPE) in C, and ONNX Runtime's Div and Mod are C's. x % -1 and
// x % 1 are both 0; kiln's quotient by -1 is -x (floor_divide_integer).
std::string safe_divisor(const Operands& o, ExportContext& c) {
  std::string minus_one = c.scalar(-1.0, o.dtype);
  return c.temp("Where", {c.temp("Equal", {o.b, minus_one}), c.scalar(1.0, o.dtype), o.b});
}

std::string mod(const std::string& a, const std::string& b, bool c_fmod, ExportContext& c) {
  pb::NodeProto* made = nullptr;
  std::string out = c.temp("Mod", {a, b}, &made);
  set_attr(*made, "fmod", int64_t(c_fmod));
  return out;
}

// mod != 0 and mod, b on different sides of zero: the C remainder needs
// moving onto b's side (Python's sign rule).
std::string signs_differ(const std::string& rest, const std::string& b, DType dtype,
                         ExportContext& c) {
  std::string zero = c.scalar(0.0, dtype);
  std::string nonzero = c.temp("Not", {c.temp("Equal", {rest, zero})});
  std::string sides = c.temp("Xor", {c.temp("Less", {b, zero}), c.temp("Less", {rest, zero})});
  return c.temp("And", {nonzero, sides});
}

void fmod(const Node& node, ExportContext& c) {
  Operands o = operands(node, c);
  if (!is_floating(o.dtype)) o.b = safe_divisor(o, c);
  auto& made = c.node_for(node.output(), "Mod", {o.a, o.b});
  set_attr(made, "fmod", int64_t(1));
}

void remainder(const Node& node, ExportContext& c) {
  Operands o = operands(node, c);
  if (!is_floating(o.dtype)) {
    auto& made = c.node_for(node.output(), "Mod", {o.a, safe_divisor(o, c)});
    set_attr(made, "fmod", int64_t(0));
    return;
  }
  std::string rest = mod(o.a, o.b, true, c);
  c.node_for(node.output(), "Where",
             {signs_differ(rest, o.b, o.dtype, c), c.temp("Add", {rest, o.b}), rest});
}

// Integers: the truncated quotient, one less where the remainder's sign
// differs from b's; -a (wrapping) for b == -1.
void floor_divide_integer(const Node& node, const Operands& o, ExportContext& c) {
  std::string b = safe_divisor(o, c);
  std::string rest = mod(o.a, b, true, c);
  std::string quotient = c.temp("Div", {o.a, b});
  std::string adjust = c.cast(signs_differ(rest, b, o.dtype, c), o.dtype);
  std::string floored = c.temp("Sub", {quotient, adjust});
  std::string by_minus_one = c.temp("Equal", {o.b, c.scalar(-1.0, o.dtype)});
  c.node_for(node.output(), "Where", {by_minus_one, c.temp("Neg", {o.a}), floored});
}

// ATen's div_floor_floating, step for step (kernels/cpu/division.h).
void floor_divide(const Node& node, ExportContext& c) {
  Operands o = operands(node, c);
  if (!is_floating(o.dtype)) return floor_divide_integer(node, o, c);
  DType t = o.dtype;
  std::string rest = mod(o.a, o.b, true, c);
  std::string div = c.temp("Div", {c.temp("Sub", {o.a, rest}), o.b});
  std::string adjust = c.cast(signs_differ(rest, o.b, t, c), t);
  div = c.temp("Sub", {div, adjust});
  std::string floored = c.temp("Floor", {div});
  std::string up = c.temp("Greater", {c.temp("Sub", {div, floored}), c.scalar(0.5, t)});
  floored = c.temp("Add", {floored, c.cast(up, t)});
  std::string quotient = c.temp("Div", {o.a, o.b});
  // A zero quotient takes a / b's sign; a zero divisor gives a / b itself.
  std::string signed_zero = c.temp("Mul", {c.scalar(0.0, t), quotient});
  std::string zero = c.scalar(0.0, t);
  floored = c.temp("Where", {c.temp("Equal", {div, zero}), signed_zero, floored});
  c.node_for(node.output(), "Where", {c.temp("Equal", {o.b, zero}), quotient, floored});
}

// ---- bitwise ----

template <const char* OpType>
void bitwise(const Node& node, ExportContext& c) {
  DType dtype = node.output()->dtype();
  KILN_CHECK(dtype == DType::Bool, "onnx export: ", node.op().name, " of ", dtype,
             " needs opset 18 (Bitwise", OpType,
             "); kiln writes opsets 13 to 17 (bools export, "
             "as ",
             OpType, ")");
  c.node_for(node.output(), OpType,
             {c.as_dtype(node.input(0), dtype), c.as_dtype(node.input(1), dtype)});
}

constexpr char kAnd[] = "And", kOr[] = "Or", kXor[] = "Xor";

// Two's complement: ~x == -x - 1 (wrapping at the most negative value too).
void bitwise_not(const Node& node, ExportContext& c) {
  std::string x = c.name(node.input(0));
  DType dtype = node.output()->dtype();
  if (dtype == DType::Bool) {
    c.node_for(node.output(), "Not", {x});
    return;
  }
  if (is_unsigned(dtype)) {  // ONNX's Neg has no unsigned types
    c.node_for(node.output(), "Sub", {c.scalar(255.0, dtype), x});
    return;
  }
  c.node_for(node.output(), "Sub", {c.temp("Neg", {x}), c.scalar(1.0, dtype)});
}

template <bool kLeft>
void bit_shift(const Node& node, ExportContext& c) {
  DType dtype = node.output()->dtype();
  KILN_CHECK(is_unsigned(dtype), "onnx export: ", node.op().name, " of ", dtype,
             " has no ONNX form (ONNX's BitShift takes unsigned integers only)");
  auto& made = c.node_for(node.output(), "BitShift",
                          {c.as_dtype(node.input(0), dtype), c.as_dtype(node.input(1), dtype)});
  set_attr(made, "direction", std::string(kLeft ? "LEFT" : "RIGHT"));
}

// ---- add_scaled, addcmul, addcdiv, masked_fill ----

// x + value * t1 * t2 (or / t2), in the kernel's order of operations.
void addc(const Node& node, ExportContext& c, const char* op_type) {
  DType dtype = node.output()->dtype();
  std::string scaled = c.temp(
      "Mul", {c.scalar(node.attrs().get_float("value"), dtype), c.as_dtype(node.input(1), dtype)});
  std::string term = c.temp(op_type, {scaled, c.as_dtype(node.input(2), dtype)});
  c.node_for(node.output(), "Add", {c.as_dtype(node.input(0), dtype), term});
}

void addcmul(const Node& node, ExportContext& c) {
  addc(node, c, "Mul");
}
void addcdiv(const Node& node, ExportContext& c) {
  addc(node, c, "Div");
}

// a + alpha * b: Mul then Add, where kiln rounds once (ONNX has no fused
// form; the difference is an ulp).
void add_scaled(const Node& node, ExportContext& c) {
  DType dtype = node.output()->dtype();
  std::string alpha = node.inputs().size() == 3 ? c.as_dtype(node.input(2), dtype)
                                                : c.scalar(node.attrs().get_float("alpha"), dtype);
  std::string scaled = c.temp("Mul", {alpha, c.as_dtype(node.input(1), dtype)});
  c.node_for(node.output(), "Add", {c.as_dtype(node.input(0), dtype), scaled});
}

void masked_fill(const Node& node, ExportContext& c) {
  DType dtype = node.output()->dtype();
  c.node_for(node.output(), "Where",
             {c.as_dtype(node.input(1), DType::Bool), c.as_dtype(node.input(2), dtype),
              c.as_dtype(node.input(0), dtype)});
}

// Kept where col - row >= diagonal (triu) or <= diagonal (tril).
template <bool Upper>
void triangle(const Node& node, ExportContext& c) {
  int64_t diagonal = node.attrs().get_int("diagonal");
  std::string x = c.name(node.input(0));
  if (c.opset() >= 14) {
    auto& made = c.node_for(node.output(), "Trilu", {x, c.scalar(double(diagonal), DType::Int64)});
    set_attr(made, "upper", int64_t(Upper));
    return;
  }
  IntList shape = static_shape(node, node.input(0));
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  Tensor mask = empty({rows, cols}, DType::Bool);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      mask.data<bool>()[i * cols + j] = Upper ? j - i >= diagonal : j - i <= diagonal;
  c.node_for(node.output(), "Where",
             {c.initializer(mask), x, c.scalar(0.0, node.output()->dtype())});
}

}  // namespace

void add_math_exporters(Table& table) {
  table["isnan"] = isnan;
  table["isinf"] = isinf;
  table["isfinite"] = isfinite;
  table["nan_to_num"] = nan_to_num;
  table["floor"] = rounding<kFloor>;
  table["ceil"] = rounding<kCeil>;
  table["round"] = rounding<kRound>;
  table["trunc"] = trunc;
  table["sign"] = sign;
  table["fmod"] = fmod;
  table["remainder"] = remainder;
  table["floor_divide"] = floor_divide;
  table["bitwise_and"] = bitwise<kAnd>;
  table["bitwise_or"] = bitwise<kOr>;
  table["bitwise_xor"] = bitwise<kXor>;
  table["bitwise_not"] = bitwise_not;
  table["bitwise_left_shift"] = bit_shift<true>;
  table["bitwise_right_shift"] = bit_shift<false>;
  table["addcmul"] = addcmul;
  table["add_scaled"] = add_scaled;
  table["addcdiv"] = addcdiv;
  table["masked_fill"] = masked_fill;
  table["triu"] = triangle<true>;
  table["tril"] = triangle<false>;
}

}  // namespace kiln::onnx
