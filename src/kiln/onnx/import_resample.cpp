// Translations of ONNX's Resize and Pad into kiln's upsampling and pad ops.
//
//   Resize nearest, asymmetric + floor             -> upsample_nearest2d
//   Resize nearest, half_pixel + round_prefer_ceil -> upsample_nearest2d exact
//   Resize linear, half_pixel / pytorch_half_pixel -> upsample_bilinear2d
//   Resize linear, align_corners                   -> ... align_corners
//   Pad constant / reflect / edge / wrap            -> pad constant / reflect /
//                                                     replicate / circular
//
// Resize scales only the last two dims of an [N, C, H, W] input; given as
// scales, they become kiln's scale factors (which its source index uses,
// as Resize's does).
#include <cmath>
#include <map>

#include "kiln/core/factory.h"
#include "kiln/onnx/import_context.h"
#include "kiln/ops/copy.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using jit::Value;
using Table = std::unordered_map<std::string, ImportFn>;
using Node = pb::NodeProto;

// The kiln op and attributes a Resize's modes stand for.
struct Resampling {
  std::string op;
  Attrs attrs;
};

Resampling resampling_of(const Node& node) {
  std::string mode = attr_string(node, "mode", "nearest");
  std::string transform = attr_string(node, "coordinate_transformation_mode", "half_pixel");
  std::string nearest = attr_string(node, "nearest_mode", "round_prefer_floor");
  if (mode == "nearest" && transform == "asymmetric" && nearest == "floor")
    return {"upsample_nearest2d", {{"exact", false}}};
  if (mode == "nearest" && transform == "half_pixel" && nearest == "round_prefer_ceil")
    return {"upsample_nearest2d", {{"exact", true}}};
  bool half_pixel = transform == "half_pixel" || transform == "pytorch_half_pixel";
  if (mode == "linear" && (half_pixel || transform == "align_corners"))
    return {"upsample_bilinear2d", {{"align_corners", transform == "align_corners"}}};
  KILN_CHECK(false, "onnx import: Resize with mode ", mode, ", coordinate_transformation_mode ",
             transform, (mode == "nearest" ? " and nearest_mode " + nearest : std::string()),
             " (kiln's upsampling is nearest with asymmetric + floor or half_pixel + "
             "round_prefer_ceil, or linear with half_pixel or align_corners)");
  return {};
}

// kiln copies equal sizes and halves doubled ones (nearest), whatever the
// scale; a scale that keeps or doubles a size must then say so.
// (align_corners and nearest's exact form have no shortcut to differ by.)
void check_shortcut(const Node& node, const Resampling& r, int64_t in, int64_t out, double scale) {
  bool nearest = r.op == "upsample_nearest2d";
  if (nearest ? r.attrs.get_bool("exact") : r.attrs.get_bool("align_corners")) return;
  bool shortcut = (out == in && scale != 1.0) || (nearest && out == 2 * in && scale != 2.0);
  KILN_CHECK(!shortcut, "onnx import: ", node.op_type(), " with scale ", scale, " from size ", in,
             " to ", out, " (kiln reads that size change as scale ", double(out) / double(in), ")");
}

void resize(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  KILN_CHECK(x->shape().size() == 4, "onnx import: Resize of a ", x->shape().size(),
             "-D input (kiln resizes the last two dims of [N, C, H, W])");
  KILN_CHECK(attr_int(node, "antialias", 0) == 0 && !has_attr(node, "axes"),
             "onnx import: Resize with antialias or axes");
  Resampling r = resampling_of(node);
  bool pytorch_half_pixel =
      attr_string(node, "coordinate_transformation_mode", "") == "pytorch_half_pixel";
  int scales_input = c.opset() >= 11 ? 2 : 1;
  Value* scales = c.input(node, scales_input);
  Value* sizes = c.opset() >= 11 ? c.input(node, 3) : nullptr;
  if (scales && scales->shape().size() == 1 && scales->shape()[0] == Dim(0)) scales = nullptr;
  DimList out(2);
  if (sizes) {
    DimList all = c.constant_sizes(sizes, "Resize's sizes");
    KILN_CHECK(all.size() == 4 && all[0] == x->shape()[0] && all[1] == x->shape()[1],
               "onnx import: Resize to sizes ", to_string(all), " from ", to_string(x->shape()),
               " (kiln resizes the last two dims)");
    out = {all[2], all[3]};
  } else {
    KILN_CHECK(scales, "onnx import: Resize without scales or sizes");
    const Tensor& data = c.constant_data(scales, "Resize's scales");
    Tensor values = to(data, DType::Float64);
    const double* s = values.data<double>();
    KILN_CHECK(values.numel() == 4 && s[0] == 1.0 && s[1] == 1.0, "onnx import: Resize scales ",
               values.numel() == 4 ? str(s[0], ", ", s[1]) : str(values.numel(), " values"),
               " (kiln resizes the last two dims)");
    for (size_t i = 0; i < 2; ++i) {
      int64_t in = concrete_size(node, 0, x, int64_t(2 + i), "Resize by scales");
      // ONNX's output size is floor(input * scale), the scale a float.
      int64_t size = int64_t(std::floor(double(float(in) * float(s[2 + i]))));
      check_shortcut(node, r, in, size, s[2 + i]);
      out[i] = size;
    }
    r.attrs.set("scales_h", s[2]);
    r.attrs.set("scales_w", s[3]);
  }
  if (pytorch_half_pixel) {
    KILN_CHECK(!(out[0] == Dim(1)) && !(out[1] == Dim(1)),
               "onnx import: Resize with pytorch_half_pixel to a size of 1 (kiln's bilinear "
               "reads half_pixel there)");
  }
  r.attrs.set("output_size", out);
  c.define(node.output(0), c.emit(r.op, {x}, r.attrs));
}

// ONNX's pads are [begin of each dim, end of each dim]; kiln's are
// (before, after) pairs from the last dim back, over the last k dims.
// Border modes need k in [ndim - 2, 3] (kiln's 1-D, 2-D and 3-D forms).
IntList kiln_pads(const IntList& pads, int64_t rank, bool border) {
  KILN_CHECK(int64_t(pads.size()) == 2 * rank, "onnx import: Pad with ", pads.size(),
             " pads for a ", rank, "-D input");
  int64_t k = 0;
  for (int64_t d = 0; d < rank; ++d)
    if (pads[size_t(d)] != 0 || pads[size_t(d + rank)] != 0) k = std::max(k, rank - d);
  if (border) k = std::max<int64_t>({k, rank - 2, 1});
  IntList out;
  for (int64_t i = 0; i < k; ++i) {
    int64_t d = rank - 1 - i;
    out.push_back(pads[size_t(d)]);
    out.push_back(pads[size_t(d + rank)]);
  }
  return out;
}

void pad(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  std::string mode = attr_string(node, "mode", "constant");
  bool from_inputs = c.opset() >= 11;
  KILN_CHECK(!from_inputs || !c.input(node, 3), "onnx import: Pad with axes");
  IntList pads =
      from_inputs ? c.constant_ints(c.input(node, 1), "Pad's pads") : attr_ints(node, "pads", {});
  const std::map<std::string, std::string> modes = {{"constant", "constant"},
                                                    {"reflect", "reflect"},
                                                    {"edge", "replicate"},
                                                    {"wrap", "circular"}};
  auto found = modes.find(mode);
  KILN_CHECK(found != modes.end(), "onnx import: Pad with mode ", mode);
  int64_t rank = int64_t(x->shape().size());
  Attrs attrs = {{"pad", kiln_pads(pads, rank, mode != "constant")}, {"mode", found->second}};
  if (mode == "constant") {
    double value = attr_float(node, "value", 0.f);
    if (Value* given = from_inputs ? c.input(node, 2) : nullptr)
      value = to(c.constant_data(given, "Pad's constant_value"), DType::Float64).item<double>();
    attrs.set("value", value);
  }
  c.define(node.output(0), c.emit("pad", {x}, attrs));
}

}  // namespace

void add_resample_importers(Table& table) {
  table["Resize"] = resize;
  table["Pad"] = pad;
}

}  // namespace kiln::onnx
