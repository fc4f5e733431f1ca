// Translations of ONNX's Resize, Upsample and Pad into kiln's ops.
//
//   Resize, Upsample                 -> resize (ONNX's semantics, any rank)
//   Pad constant / reflect / edge / wrap -> pad constant / reflect /
//                                          replicate / circular
//
// resize's output size is an attribute, so Resize's scales or sizes must
// be known at import (a constant, symbolic sizes, or a model input the
// import specializes on); its roi may be a run-time value. Opset 10's
// Resize and Upsample have no nearest_mode: they round as ONNX Runtime
// does there, down when upscaling and up when downscaling (both
// asymmetric).
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

// An optional input given as an empty tensor (Resize's "" roi or scales).
bool is_empty(const Value* value) {
  return value && value->shape().size() == 1 && value->shape()[0] == Dim(0);
}

Value* present(Value* value) {
  return is_empty(value) ? nullptr : value;
}

// Resize's axes (opset 18): the dims its roi, scales and sizes name.
IntList resized_axes(const Node& node, int64_t rank) {
  IntList axes = attr_ints(node, "axes", {});
  if (axes.empty()) {
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
    return axes;
  }
  for (int64_t& axis : axes) {
    KILN_CHECK(axis >= -rank && axis < rank, "onnx import: Resize axis ", axis, " of a ", rank,
               "-D input");
    if (axis < 0) axis += rank;
  }
  return axes;
}

std::vector<double> doubles_of(const Tensor& data) {
  return to(data, DType::Float64).to_vector<double>();
}

// A constant float64 vector.
Value* constant_doubles(ImportContext& c, const std::vector<double>& values) {
  Tensor data = empty({int64_t(values.size())}, DType::Float64);
  std::copy(values.begin(), values.end(), data.data<double>());
  return c.constant(data);
}

// The size of dim `d` (`in`) scaled by `scale`: floor(in * scale), in float
// as ONNX Runtime computes it. A symbolic size stays symbolic where the
// scale keeps it or multiplies it by a whole number.
Dim scaled_size(const Node& node, const Value* x, int64_t d, double scale) {
  const Dim& in = x->shape()[size_t(d)];
  if (scale == 1.0) return in;
  if (!in.is_static() && scale > 1.0 && scale == std::floor(scale)) return in * int64_t(scale);
  const int64_t size = concrete_size(node, 0, x, d, "Resize by scales");
  return int64_t(std::floor(double(float(size) * float(scale))));
}

// What one Resize or Upsample node computes, in resize's terms.
struct ResizeCall {
  Attrs attrs;
  DimList output;
  Value* roi = nullptr;
  Value* scales = nullptr;
  std::vector<double> scale_values;  // per dim when known, for opset 10's rounding
};

// sizes (per axis) -> the output, and the scales a keep_aspect_ratio_policy
// gives (its one scale on every resized axis).
void from_sizes(const Node& node, ImportContext& c, Value* x, Value* sizes, const IntList& axes,
                ResizeCall& call) {
  DimList given = c.constant_sizes(sizes, "Resize's sizes");
  KILN_CHECK(given.size() == axes.size(), "onnx import: Resize with ", given.size(), " sizes for ",
             axes.size(), " axes of a ", x->shape().size(), "-D input");
  const std::string policy = attr_string(node, "keep_aspect_ratio_policy", "stretch");
  if (policy == "stretch") {
    for (size_t i = 0; i < axes.size(); ++i)
      call.output[size_t(axes[i])] = given[i];
    return;
  }
  KILN_CHECK(policy == "not_larger" || policy == "not_smaller",
             "onnx import: Resize with keep_aspect_ratio_policy ", policy);
  double scale = policy == "not_larger" ? INFINITY : 0.0;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t in = concrete_size(node, 0, x, axes[i], "Resize keeping the aspect ratio");
    KILN_CHECK(given[i].is_static(), "onnx import: Resize keeping the aspect ratio to sizes ",
               to_string(given), " (kiln needs them as numbers)");
    const double ratio = double(given[i].static_value()) / double(in);
    scale = policy == "not_larger" ? std::min(scale, ratio) : std::max(scale, ratio);
  }
  std::vector<double> scales(x->shape().size(), 1.0);
  for (int64_t axis : axes) {
    const int64_t in = concrete_size(node, 0, x, axis, "Resize keeping the aspect ratio");
    call.output[size_t(axis)] = int64_t(std::floor(scale * double(in) + 0.5));  // half up
    scales[size_t(axis)] = scale;
  }
  call.scales = constant_doubles(c, scales);
}

void from_scales(const Node& node, ImportContext& c, Value* x, Value* scales, const IntList& axes,
                 ResizeCall& call) {
  std::vector<double> given = doubles_of(c.constant_data(scales, "Resize's scales"));
  KILN_CHECK(given.size() == axes.size(), "onnx import: Resize with ", given.size(), " scales for ",
             axes.size(), " axes of a ", x->shape().size(), "-D input");
  std::vector<double> all(x->shape().size(), 1.0);
  for (size_t i = 0; i < axes.size(); ++i) {
    KILN_CHECK(given[i] > 0.0, "onnx import: Resize with a scale of ", given[i]);
    all[size_t(axes[i])] = given[i];
  }
  for (size_t d = 0; d < all.size(); ++d)
    call.output[d] = scaled_size(node, x, int64_t(d), all[d]);
  call.scale_values = all;
  call.scales = constant_doubles(c, all);
}

// tf_crop_and_resize's roi over every dim: [starts, ends], 0 and 1 on the
// dims axes leaves out. A run-time roi must name every dim.
Value* full_roi(const Node& node, ImportContext& c, Value* roi, const IntList& axes, int64_t rank) {
  KILN_CHECK(roi, "onnx import: Resize with tf_crop_and_resize needs a roi");
  const bool known =
      c.is_constant(roi) || (roi->kind() == jit::ValueKind::Param && roi->data().defined());
  if (!known) {
    bool every_dim = int64_t(axes.size()) == rank;
    for (size_t i = 0; i < axes.size() && every_dim; ++i)
      every_dim = axes[i] == int64_t(i);
    KILN_CHECK(every_dim, "onnx import: Resize with a run-time roi for axes ",
               to_string(to_dims(axes)), " (kiln reads a run-time roi over every dim)");
    return roi;
  }
  std::vector<double> given = doubles_of(c.constant_data(roi, "Resize's roi"));
  const size_t n = axes.size();
  KILN_CHECK(given.size() == 2 * n, "onnx import: Resize with a roi of ", given.size(),
             " values for ", n, " axes");
  std::vector<double> all(size_t(2 * rank), 0.0);
  std::fill(all.begin() + rank, all.end(), 1.0);
  for (size_t i = 0; i < n; ++i) {
    all[size_t(axes[i])] = given[i];
    all[size_t(axes[i] + rank)] = given[i + n];
  }
  return constant_doubles(c, all);
}

// Opset 10's rounding (ONNX Runtime's): floor where an axis grows, ceil
// where it shrinks.
std::string legacy_nearest_mode(const ResizeCall& call) {
  bool grows = false, shrinks = false;
  for (double s : call.scale_values) {
    grows = grows || s > 1.0;
    shrinks = shrinks || s < 1.0;
  }
  KILN_CHECK(!(grows && shrinks),
             "onnx import: Resize (opset 10) or Upsample with nearest mode growing some axes and "
             "shrinking others");
  return shrinks ? "ceil" : "floor";
}

Attrs resize_attrs(const Node& node, bool legacy) {
  std::string mode = attr_string(node, "mode", "nearest");
  if (mode == "bilinear") mode = "linear";  // Upsample-7's old spelling
  KILN_CHECK(mode == "nearest" || mode == "linear" || mode == "cubic",
             "onnx import: ", node.op_type(), " with mode ", mode);
  return {{"mode", mode},
          {"coordinate_transformation_mode",
           legacy ? std::string("asymmetric")
                  : attr_string(node, "coordinate_transformation_mode", "half_pixel")},
          {"nearest_mode", attr_string(node, "nearest_mode", "round_prefer_floor")},
          {"cubic_coeff_a", double(attr_float(node, "cubic_coeff_a", -0.75f))},
          {"exclude_outside", attr_int(node, "exclude_outside", 0) != 0},
          {"extrapolation_value", double(attr_float(node, "extrapolation_value", 0.f))},
          {"antialias", attr_int(node, "antialias", 0) != 0}};
}

void emit_resize(const Node& node, ImportContext& c, Value* x, ResizeCall& call, bool legacy) {
  if (legacy) call.attrs.set("nearest_mode", legacy_nearest_mode(call));
  call.attrs.set("output_size", canonical_attr(call.output));
  c.define(node.output(0), c.emit("resize", {x, call.roi, call.scales}, call.attrs));
}

void resize(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  const int64_t rank = int64_t(x->shape().size());
  const bool legacy = c.opset() < 11;
  ResizeCall call{resize_attrs(node, legacy), x->shape()};
  const IntList axes = resized_axes(node, rank);
  Value* scales = present(c.input(node, legacy ? 1 : 2));
  Value* sizes = legacy ? nullptr : present(c.input(node, 3));
  KILN_CHECK(!scales || !sizes, "onnx import: Resize with both scales and sizes");
  KILN_CHECK(scales || sizes, "onnx import: Resize without scales or sizes");
  if (sizes) {
    from_sizes(node, c, x, sizes, axes, call);
  } else {
    from_scales(node, c, x, scales, axes, call);
  }
  if (call.attrs.get_string("coordinate_transformation_mode") == "tf_crop_and_resize")
    call.roi = full_roi(node, c, present(c.input(node, 1)), axes, rank);
  emit_resize(node, c, x, call, legacy);
}

// Upsample (opsets 7 to 9): Resize of opset 10, its scales an attribute
// before opset 9.
void upsample(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  const int64_t rank = int64_t(x->shape().size());
  ResizeCall call{resize_attrs(node, true), x->shape()};
  IntList axes;
  for (int64_t d = 0; d < rank; ++d)
    axes.push_back(d);
  Value* scales = c.input(node, 1);
  if (!scales) {
    std::vector<float> given;
    if (const pb::AttributeProto* attr = find_attr(node, "scales"))
      given.assign(attr->floats().begin(), attr->floats().end());
    Tensor data = empty({int64_t(given.size())}, DType::Float32);
    std::copy(given.begin(), given.end(), data.data<float>());
    scales = c.constant(data);
  }
  from_scales(node, c, x, scales, axes, call);
  emit_resize(node, c, x, call, true);
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
  table["Upsample"] = upsample;
  table["Pad"] = pad;
}

}  // namespace kiln::onnx
