// Translations of ONNX's quantization ops into kiln ops, each computing
// what ONNX Runtime computes (its CPU kernels are the oracle):
//
//   QuantizeLinear        -> saturate(round(x / scale) + zero_point): div,
//                            round (half to even), add, clamp, cast
//   DequantizeLinear      -> float(int32(x) - int32(zero_point)) * scale
//   DynamicQuantizeLinear -> the range of x widened to hold 0 gives scale
//                            = (max - min) / 255 (1 for an all-zero x) and
//                            zero_point = round(saturate(-min / scale));
//                            then QuantizeLinear to uint8
//   MatMulInteger         -> int32 matmul of the operands less their zero
//                            points (per row of A, per column of B)
//   ConvInteger           -> Conv of the operands less their zero points,
//                            in float64 (exact for 8-bit products), to int32
//   QLinearMatMul,        -> the int32 result (plus QLinearConv's bias),
//   QLinearConv              as float times a_scale * b_scale / y_scale,
//                            rounded, plus y's zero point, saturated
//
// A per-axis scale or zero point (1-D) lies along `axis` (QuantizeLinear,
// DequantizeLinear) or the output channels (QLinearConv's w_scale).
#include "kiln/core/factory.h"
#include "kiln/onnx/import_context.h"
#include "kiln/onnx/import_util.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using jit::Value;
using Node = pb::NodeProto;

Value* cast(Value* v, DType dtype, ImportContext& c) {
  return v->dtype() == dtype ? v : c.emit("cast", {v}, {{"dtype", dtype}});
}

// A 1-D parameter reshaped to lie along `axis` of a rank-`rank` operand; a
// 0-d one as it is.
Value* along_axis(Value* v, int64_t axis, int64_t rank, ImportContext& c) {
  if (rank_of(v) == 0 || rank <= 1) return v;
  KILN_CHECK(rank_of(v) == 1,
             "onnx import: a per-axis quantization parameter must be 0-d or 1-D, got ", v->shape());
  DimList shape(size_t(rank), Dim(1));
  shape[size_t(axis)] = v->shape()[0];
  return c.emit("reshape", {v}, {{"shape", shape}});
}

void check_8_bit(DType dtype, const Node& node) {
  KILN_CHECK_TYPE(dtype == DType::UInt8 || dtype == DType::Int8, "onnx import: ", node.op_type(),
                  " node '", node.name(), "' quantizes to ", dtype, "; kiln has uint8 and int8");
}

// saturate(round(scaled) + zero_point) in `dtype` (uint8 or int8); scaled
// and the zero point (null: 0) are float32.
Value* saturate_to(Value* scaled, Value* zero_point, DType dtype, ImportContext& c) {
  Value* q = c.emit("round", {scaled});
  if (zero_point) q = c.emit("add", {q, cast(zero_point, DType::Float32, c)});
  const bool is_u8 = dtype == DType::UInt8;
  q = c.emit("clamp", {q}, {{"min", is_u8 ? 0.0 : -128.0}, {"max", is_u8 ? 255.0 : 127.0}});
  return cast(q, dtype, c);
}

int64_t axis_of(const Node& node, const Value* x) {
  int64_t rank = rank_of(x);
  int64_t axis = wrap(attr_int(node, "axis", 1), rank);
  KILN_CHECK(rank <= 1 || (axis >= 0 && axis < rank), "onnx import: ", node.op_type(), " node '",
             node.name(), "' has axis ", attr_int(node, "axis", 1), " for a rank-", rank, " input");
  return axis;
}

// Opset 21's blocked quantization: a scale per block of `block_size`
// elements along the axis, which the compositions here do not build.
void refuse_blocks(const Node& node) {
  KILN_CHECK(attr_int(node, "block_size", 0) == 0, "onnx import: ", node.op_type(), " node '",
             node.name(), "' quantizes in blocks (block_size ", attr_int(node, "block_size", 0),
             "), which kiln does not translate");
}

void quantize_linear(const Node& node, ImportContext& c) {
  refuse_blocks(node);
  Value* x = c.input(node, 0);
  Value* zero_point = c.input(node, 2);
  // The zero point's type, else opset 21's output_dtype, else uint8.
  DType dtype = DType::UInt8;
  if (zero_point) {
    dtype = zero_point->dtype();
  } else if (attr_int(node, "output_dtype", 0) != 0) {
    dtype = dtype_from_onnx(attr_int(node, "output_dtype", 0),
                            "QuantizeLinear's output_dtype (node '" + node.name() + "')");
  }
  check_8_bit(dtype, node);
  int64_t axis = axis_of(node, x), rank = rank_of(x);
  Value* scale = along_axis(c.input(node, 1), axis, rank, c);
  if (zero_point) zero_point = along_axis(zero_point, axis, rank, c);
  Value* scaled = c.emit("div", {cast(x, DType::Float32, c), scale});
  define(node, c, saturate_to(scaled, zero_point, dtype, c));
}

void dequantize_linear(const Node& node, ImportContext& c) {
  refuse_blocks(node);
  Value* x = c.input(node, 0);
  int64_t axis = axis_of(node, x), rank = rank_of(x);
  Value* scale = along_axis(c.input(node, 1), axis, rank, c);
  Value* shifted = cast(x, DType::Int32, c);
  if (Value* zero_point = c.input(node, 2)) {
    shifted =
        c.emit("sub", {shifted, cast(along_axis(zero_point, axis, rank, c), DType::Int32, c)});
  }
  define(node, c, c.emit("mul", {cast(shifted, DType::Float32, c), scale}));
}

Value* scalar_f32(double v, ImportContext& c) {
  return c.constant(full({}, v, DType::Float32));
}

void dynamic_quantize_linear(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  Value* zero = scalar_f32(0.0, c);
  Value* low = c.emit("minimum", {c.emit("amin", {x}), zero});
  Value* high = c.emit("maximum", {c.emit("amax", {x}), zero});
  Value* range = c.emit("sub", {high, low});
  Value* scale = c.emit("where", {c.emit("eq", {range, zero}), scalar_f32(1.0, c),
                                  c.emit("div", {range, scalar_f32(255.0, c)})});
  Value* initial = c.emit("neg", {c.emit("div", {low, scale})});
  Value* zero_point_f =
      c.emit("round", {c.emit("clamp", {initial}, {{"min", 0.0}, {"max", 255.0}})});
  Value* y = saturate_to(c.emit("div", {x, scale}), zero_point_f, DType::UInt8, c);
  define(node, c, y, 0);
  define(node, c, scale, 1);
  define(node, c, cast(zero_point_f, DType::UInt8, c), 2);
}

// x less its zero point (null: none), in `dtype`; a 1-D zero point lies
// along `axis` of x.
Value* shifted(Value* x, Value* zero_point, int64_t axis, DType dtype, ImportContext& c) {
  Value* wide = cast(x, dtype, c);
  if (!zero_point) return wide;
  return c.emit("sub", {wide, cast(along_axis(zero_point, axis, rank_of(x), c), dtype, c)});
}

// The int32 product of A and B less their zero points: A's per row (its
// second-to-last axis), B's per column (its last).
Value* integer_matmul(Value* a, Value* a_zero, Value* b, Value* b_zero, ImportContext& c) {
  Value* a_wide = shifted(a, a_zero, std::max<int64_t>(rank_of(a) - 2, 0), DType::Int32, c);
  Value* b_wide = shifted(b, b_zero, rank_of(b) - 1, DType::Int32, c);
  return c.emit("matmul", {a_wide, b_wide});
}

void matmul_integer(const Node& node, ImportContext& c) {
  define(node, c,
         integer_matmul(c.input(node, 0), c.input(node, 2), c.input(node, 1), c.input(node, 3), c));
}

// acc (int32) * multiplier, requantized to y's type as ONNX Runtime's
// MlasRequantizeOutput does.
Value* requantize(Value* acc, Value* multiplier, Value* y_zero, ImportContext& c) {
  DType dtype = y_zero ? y_zero->dtype() : DType::UInt8;
  Value* scaled = c.emit("mul", {cast(acc, DType::Float32, c), multiplier});
  return saturate_to(scaled, y_zero, dtype, c);
}

void qlinear_matmul(const Node& node, ImportContext& c) {
  Value* acc =
      integer_matmul(c.input(node, 0), c.input(node, 2), c.input(node, 3), c.input(node, 5), c);
  Value* multiplier =
      c.emit("div", {c.emit("mul", {c.input(node, 1), c.input(node, 4)}), c.input(node, 6)});
  Value* y_zero = c.input(node, 7);
  check_8_bit(y_zero ? y_zero->dtype() : DType::UInt8, node);
  define(node, c, requantize(acc, multiplier, y_zero, c));
}

// ONNX's Conv over x and w (already shifted by their zero points, float64)
// with `node`'s attributes: a Conv node of those inputs goes through the
// Conv translation, so padding and auto_pad mean what they mean there.
Value* conv_of(const Node& node, Value* x, Value* w, ImportContext& c) {
  const std::string base = node.output(0) + "/kiln_quant_";
  c.define(base + "x", x);
  c.define(base + "w", w);
  Node conv = node;
  conv.set_op_type("Conv");
  conv.clear_input();
  conv.add_input(base + "x");
  conv.add_input(base + "w");
  conv.clear_output();
  conv.add_output(base + "y");
  ImportFn translate = find_importer(conv);
  KILN_CHECK(translate, "onnx import: no Conv translation for ", node.op_type());
  translate(conv, c);
  return c.value(base + "y");
}

// ConvInteger(x, w, x_zero_point, w_zero_point): w's zero point per output
// channel (axis 0).
void conv_integer(const Node& node, ImportContext& c) {
  Value* x = shifted(c.input(node, 0), c.input(node, 2), 1, DType::Float64, c);
  Value* w = shifted(c.input(node, 1), c.input(node, 3), 0, DType::Float64, c);
  define(node, c, cast(conv_of(node, x, w, c), DType::Int32, c));
}

// QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B): B is
// int32 and adds to the accumulator before the requantization.
void qlinear_conv(const Node& node, ImportContext& c) {
  Value* x = shifted(c.input(node, 0), c.input(node, 2), 1, DType::Float64, c);
  Value* w = shifted(c.input(node, 3), c.input(node, 5), 0, DType::Float64, c);
  Value* acc = conv_of(node, x, w, c);
  int64_t rank = rank_of(acc);
  if (Value* bias = c.input(node, 8)) {
    acc = c.emit("add", {acc, along_axis(cast(bias, DType::Float64, c), 1, rank, c)});
  }
  Value* w_scale = along_axis(c.input(node, 4), 1, rank, c);
  Value* multiplier = c.emit("div", {c.emit("mul", {c.input(node, 1), w_scale}), c.input(node, 6)});
  Value* y_zero = c.input(node, 7);
  check_8_bit(y_zero ? y_zero->dtype() : DType::UInt8, node);
  define(node, c, requantize(cast(acc, DType::Int32, c), multiplier, y_zero, c));
}

}  // namespace

void add_quant_importers(Table& table) {
  table["QuantizeLinear"] = quantize_linear;
  table["DequantizeLinear"] = dequantize_linear;
  table["DynamicQuantizeLinear"] = dynamic_quantize_linear;
  table["MatMulInteger"] = matmul_integer;
  table["QLinearMatMul"] = qlinear_matmul;
  table["ConvInteger"] = conv_integer;
  table["QLinearConv"] = qlinear_conv;
}

}  // namespace kiln::onnx
