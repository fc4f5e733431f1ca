// ONNX translations of pad and of the upsampling ops.
//
//   pad, negative amounts  -> Slice (a crop first: PyTorch's modes read the
//                             cropped input as if it were the input)
//   pad constant           -> Pad mode=constant with the value
//   pad reflect/replicate  -> Pad mode=reflect / edge
//   pad circular           -> Concat(x[-before:], x, x[:after]) per dim
//                             (Pad's wrap mode needs opset 19)
//   upsample_nearest2d     -> Resize nearest: asymmetric + floor, as
//                             PyTorch's floor(dst * scale); the exact form
//                             half_pixel + round_prefer_ceil, which is
//                             floor((dst + 0.5) * scale)
//   upsample_bilinear2d    -> Resize linear: align_corners, or half_pixel
//                             (PyTorch's (dst + 0.5) * scale - 0.5, also at
//                             an output size of 1)
//   resize                 -> Resize, attributes by the same names; its
//                             scales when it has them (whose floor(in *
//                             scale) is its output size), else the output
//                             shape as sizes
//
// PyTorch's source index uses 1 / scale_factor when one was given, else
// input / output size; Resize's does the same with its scales input, else
// with output / input size as the scale, so kiln's scales are written as
// Resize's scales when they give kiln's output size.
#include <climits>

#include "kiln/core/factory.h"
#include "kiln/onnx/export_context.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using jit::Node;
using Table = std::unordered_map<std::string, ExportFn>;

struct PadAmounts {
  std::vector<int64_t> axes, crop_begin, crop_end;  // the cropped axes
  std::vector<int64_t> before, after;               // per dim of the input
};

// kiln's pad list ((before, after) pairs from the last dim back) split into
// crops (its negative amounts) and pads (its positive ones).
PadAmounts pad_amounts(const Node& node) {
  const IntList& pad = node.attrs().get_ints("pad");
  size_t rank = node.input(0)->shape().size();
  PadAmounts p;
  p.before.assign(rank, 0);
  p.after.assign(rank, 0);
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    size_t d = rank - 1 - i;
    int64_t before = pad[2 * i], after = pad[2 * i + 1];
    if (before < 0 || after < 0) {
      p.axes.push_back(int64_t(d));
      p.crop_begin.push_back(std::max<int64_t>(-before, 0));
      p.crop_end.push_back(after < 0 ? after : INT64_MAX);
    }
    p.before[d] = std::max<int64_t>(before, 0);
    p.after[d] = std::max<int64_t>(after, 0);
  }
  return p;
}

std::string circular(const PadAmounts& p, std::string x, ExportContext& c) {
  for (size_t d = 0; d < p.before.size(); ++d) {
    if (p.before[d] == 0 && p.after[d] == 0) continue;
    std::vector<std::string> parts;
    int64_t axis = int64_t(d);
    if (p.before[d] > 0)
      parts.push_back(
          c.temp("Slice", {x, c.ints({-p.before[d]}), c.ints({INT64_MAX}), c.ints({axis})}));
    parts.push_back(x);
    if (p.after[d] > 0)
      parts.push_back(c.temp("Slice", {x, c.ints({0}), c.ints({p.after[d]}), c.ints({axis})}));
    pb::NodeProto* made = nullptr;
    x = c.temp("Concat", parts, &made);
    set_attr(*made, "axis", axis);
  }
  return x;
}

void pad(const Node& node, ExportContext& c) {
  const std::string& mode = node.attrs().get_string("mode");
  PadAmounts p = pad_amounts(node);
  std::string x = c.name(node.input(0));
  if (!p.axes.empty())
    x = c.temp("Slice", {x, c.ints(p.crop_begin), c.ints(p.crop_end), c.ints(p.axes)});
  if (mode == "circular") {
    c.node_for(node.output(), "Identity", {circular(p, x, c)});
    return;
  }
  std::vector<int64_t> pads = p.before;
  pads.insert(pads.end(), p.after.begin(), p.after.end());
  std::vector<std::string> inputs = {x, c.ints(pads)};
  if (mode == "constant") {
    double value = node.attrs().has("value") ? node.attrs().get_float("value") : 0.0;
    inputs.push_back(c.scalar(value, node.output()->dtype()));
  }
  auto& made = c.node_for(node.output(), "Pad", inputs);
  set_attr(made, "mode", std::string(mode == "replicate" ? "edge" : mode));
}

// The scale Resize needs for one dim: the one kiln was given, except where
// kiln (as PyTorch) takes a shortcut whatever the scale: equal sizes copy,
// and nearest's (not the exact form's) doubled size takes dst / 2.
double scale_for(const Node& node, const Dim& from, const Dim& to, double given) {
  if (!from.is_static() || !to.is_static()) return given;
  int64_t in = from.static_value(), out = to.static_value();
  bool exact = node.attrs().has("exact") && node.attrs().get_bool("exact");
  if (!exact && in == out) return 1.0;
  if (!exact && node.op().name == "upsample_nearest2d" && out == 2 * in) return 2.0;
  int64_t sized = int64_t(float(in) * float(given));
  KILN_CHECK(sized == out, "onnx export: ", node.op().name, " to size ", out, " with scale ", given,
             " from size ", in, " (Resize would make ", sized,
             "; PyTorch's coordinates use the scale)");
  return given;
}

// Resize's scales [1, 1, sh, sw] when kiln was given scales (its output
// is floor(input * scale)); "" otherwise.
std::string resize_scales(const Node& node, ExportContext& c, bool use_scales) {
  const Attrs& a = node.attrs();
  if (!use_scales || !a.has("scales_h") || !a.has("scales_w")) return "";
  const DimList& in = node.input(0)->shape();
  const DimList& out = node.output()->shape();
  Tensor data = empty({4}, DType::Float32);
  float* values = data.data<float>();
  values[0] = values[1] = 1.0f;
  values[2] = float(scale_for(node, in[2], out[2], a.get_float("scales_h")));
  values[3] = float(scale_for(node, in[3], out[3], a.get_float("scales_w")));
  return c.initializer(data);
}

void resize(const Node& node, ExportContext& c, const std::string& mode,
            const std::string& transform, bool use_scales) {
  std::string scales = resize_scales(node, c, use_scales);
  // roi unused; either scales or sizes, the other one "". The sizes keep
  // the input's batch and channels as they are at run time.
  std::string x = c.name(node.input(0));
  std::vector<std::string> inputs = {x, "", scales};
  if (scales.empty()) {
    const DimList& out = node.output()->shape();
    std::string kept = c.temp("Slice", {c.temp("Shape", {x}), c.ints({0}), c.ints({2})});
    pb::NodeProto* made = nullptr;
    inputs.push_back(c.temp("Concat", {kept, c.sizes({out[2], out[3]})}, &made));
    set_attr(*made, "axis", int64_t(0));
  }
  auto& resized = c.node_for(node.output(), "Resize", inputs);
  set_attr(resized, "mode", mode);
  set_attr(resized, "coordinate_transformation_mode", transform);
  if (mode != "nearest") return;
  bool exact = node.attrs().get_bool("exact");
  set_attr(resized, "nearest_mode", std::string(exact ? "round_prefer_ceil" : "floor"));
}

void upsample_nearest2d(const Node& node, ExportContext& c) {
  bool exact = node.attrs().get_bool("exact");
  resize(node, c, "nearest", exact ? "half_pixel" : "asymmetric", true);
}

// align_corners ignores the scales (PyTorch's (in - 1) / (out - 1)).
void upsample_bilinear2d(const Node& node, ExportContext& c) {
  bool corners = node.attrs().get_bool("align_corners");
  resize(node, c, "linear", corners ? "align_corners" : "half_pixel", !corners);
}

void resize_op(const Node& node, ExportContext& c) {
  const Attrs& a = node.attrs();
  const std::string& transform = a.get_string("coordinate_transformation_mode");
  const bool antialias = a.get_bool("antialias");
  const int64_t needs = antialias ? 18 : transform == "half_pixel_symmetric" ? 19 : 11;
  KILN_CHECK(c.opset() >= needs, "onnx export: resize",
             (antialias ? " with antialias" : " with " + transform), " needs opset ", needs,
             " or later, exporting to ", c.opset());
  std::vector<std::string> inputs = {c.name(node.input(0)), c.name(node.input(1))};
  if (node.input(2)) {
    inputs.push_back(c.as_dtype(node.input(2), DType::Float32));
  } else {
    inputs.push_back("");
    inputs.push_back(c.sizes(node.output()->shape()));
  }
  auto& made = c.node_for(node.output(), "Resize", inputs);
  for (const char* name : {"mode", "coordinate_transformation_mode", "nearest_mode"})
    set_attr(made, name, a.get_string(name));
  set_attr(made, "cubic_coeff_a", float(a.get_float("cubic_coeff_a")));
  set_attr(made, "exclude_outside", int64_t(a.get_bool("exclude_outside")));
  set_attr(made, "extrapolation_value", float(a.get_float("extrapolation_value")));
  if (antialias) set_attr(made, "antialias", int64_t(1));
}

}  // namespace

void add_resample_exporters(Table& table) {
  table["resize"] = resize_op;
  table["pad"] = pad;
  table["upsample_nearest2d"] = upsample_nearest2d;
  table["upsample_bilinear2d"] = upsample_bilinear2d;
}

}  // namespace kiln::onnx
