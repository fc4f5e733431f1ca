// Translations of ONNX's IsInf, Sign, Mod and the ops that order or walk a
// tensor (Trilu, CumSum, TopK, Tile) into kiln ops. Tan, ..., Erf, IsNaN,
// Floor, Ceil, Round (half to even in both) and BitwiseAnd & co. are one
// kiln op each, declared in their OpDefs (import_generic.cpp).
//
//   IsInf                   -> isinf (one sign: and x > 0 / x < 0)
//   Sign                    -> sign (NaN kept, as ONNX Runtime does)
//   Mod fmod=1 / fmod=0     -> fmod / remainder
//   BitShift LEFT / RIGHT   -> bitwise_left_shift / bitwise_right_shift
//   Trilu                   -> triu / tril
//   CumSum                  -> cumsum (reverse: flipped around it;
//                              exclusive: shifted by one)
//   TopK                    -> topk
//   Tile                    -> view, expand, reshape (as kiln's repeat)
#include "kiln/core/factory.h"
#include "kiln/onnx/import_context.h"
#include "kiln/onnx/import_util.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using jit::Value;
using Node = pb::NodeProto;

// IsInf detecting one sign only: infinite and of that sign (bools multiply
// as and).
void is_inf(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  bool positive = attr_int(node, "detect_positive", 1) != 0;
  bool negative = attr_int(node, "detect_negative", 1) != 0;
  Value* infinite = c.emit("isinf", {x});
  if (positive == negative) {
    if (!positive) infinite = c.emit("logical_not", {c.emit("eq", {x, x})});
    return define(node, c, infinite);
  }
  Value* zero = c.constant(full({}, 0.0, x->dtype()));
  Value* side = c.emit(positive ? "gt" : "lt", {x, zero});
  define(node, c, c.emit("mul", {infinite, side}));
}

// ONNX Runtime's Sign keeps NaN, where kiln's (PyTorch's) gives 0.
void sign(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  Value* sign = c.emit("sign", {x});
  if (!is_floating(x->dtype())) return define(node, c, sign);
  define(node, c, c.emit("where", {c.emit("isnan", {x}), x, sign}));
}

void mod(const Node& node, ImportContext& c) {
  bool c_fmod = attr_int(node, "fmod", 0) != 0;
  define(node, c, c.emit(c_fmod ? "fmod" : "remainder", {c.input(node, 0), c.input(node, 1)}));
}

void bit_shift(const Node& node, ImportContext& c) {
  std::string direction = attr_string(node, "direction", "");
  KILN_CHECK(direction == "LEFT" || direction == "RIGHT", "onnx import: BitShift node '",
             node.name(), "' has direction '", direction, "', expected LEFT or RIGHT");
  const char* op = direction == "LEFT" ? "bitwise_left_shift" : "bitwise_right_shift";
  define(node, c, c.emit(op, {c.input(node, 0), c.input(node, 1)}));
}

void trilu(const Node& node, ImportContext& c) {
  Value* k = c.input(node, 1);
  int64_t diagonal = k ? c.constant_ints(k, "Trilu's k").at(0) : 0;
  bool upper = attr_int(node, "upper", 1) != 0;
  define(node, c, c.emit(upper ? "triu" : "tril", {c.input(node, 0)}, {{"diagonal", diagonal}}));
}

// kiln's cumsum of an integer gives int64 (as PyTorch's); ONNX keeps the
// input's type.
void cum_sum(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  int64_t rank = rank_of(x);
  int64_t axis = wrap(c.constant_ints(c.input(node, 1), "CumSum's axis").at(0), rank);
  bool reverse = attr_int(node, "reverse", 0) != 0;
  Attrs along = {{"dims", IntList{axis}}};
  if (reverse) x = c.emit("flip", {x}, along);
  Value* total = c.emit("cumsum", {x}, {{"dim", axis}});
  if (attr_int(node, "exclusive", 0) != 0) {
    // total[i - 1] at i, 0 at the start: the last total dropped, a 0 padded on.
    Dim length = x->shape()[size_t(axis)] - 1;
    Value* kept = c.emit("narrow", {total}, {{"dim", axis}, {"start", Dim(0)}, {"length", length}});
    IntList pads(size_t(2 * (rank - axis)), 0);
    pads[size_t(2 * (rank - 1 - axis))] = 1;
    total = c.emit("pad", {kept}, {{"pad", pads}, {"mode", std::string("constant")}});
  }
  if (reverse) total = c.emit("flip", {total}, along);
  if (total->dtype() != x->dtype()) total = c.emit("cast", {total}, {{"dtype", x->dtype()}});
  define(node, c, total);
}

void top_k(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  int64_t k = c.input(node, 1) ? c.constant_ints(c.input(node, 1), "TopK's k").at(0)
                               : attr_int(node, "k", 1);
  int64_t axis = wrap(attr_int(node, "axis", -1), rank_of(x));
  std::vector<Value*> outputs = c.emit_multi(
      "topk", {x},
      {{"k", k}, {"dim", axis}, {"largest", attr_int(node, "largest", 1) != 0}, {"sorted", true}});
  define(node, c, outputs[0], 0);
  if (node.output_size() > 1) define(node, c, outputs[1], 1);
}

// x as [1, s0, 1, s1, ...], expanded to [r0, s0, r1, s1, ...], merged
// pairwise into [r0 s0, r1 s1, ...]; the repeats may be sizes (a batch).
void tile(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  DimList repeats = c.constant_sizes(c.input(node, 1), "Tile's repeats");
  const DimList& shape = x->shape();
  KILN_CHECK(repeats.size() == shape.size(), "onnx import: Tile with ", to_string(repeats),
             " repeats for a ", shape.size(), "-D input");
  DimList spread, expanded, merged;
  for (size_t i = 0; i < shape.size(); ++i) {
    spread.insert(spread.end(), {Dim(1), shape[i]});
    expanded.insert(expanded.end(), {repeats[i], shape[i]});
    merged.push_back(repeats[i] * shape[i]);
  }
  Value* spread_x = c.emit("reshape", {x}, {{"shape", spread}});
  Value* wide = c.emit("expand", {spread_x}, {{"size", expanded}});
  define(node, c, c.emit("reshape", {wide}, {{"shape", merged}}));
}

}  // namespace

void add_math_importers(Table& table) {
  table["IsInf"] = is_inf;
  table["Sign"] = sign;
  table["Mod"] = mod;
  table["BitShift"] = bit_shift;
  table["Trilu"] = trilu;
  table["CumSum"] = cum_sum;
  table["TopK"] = top_k;
  table["Tile"] = tile;
}

}  // namespace kiln::onnx
