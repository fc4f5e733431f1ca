// RoiAlign's translation into kiln ops. Each region of interest is cut into
// output_height x output_width bins, each bin sampled at sampling_ratio^2
// points, each point interpolated bilinearly from the four pixels around it
// (ONNX Runtime's rules: a point more than one pixel outside reads zero,
// one less than that is clamped to the border), and the points of a bin
// averaged (mode avg) or their largest weighted corner taken (mode max, as
// ONNX Runtime computes it).
//
// The weights along y and x are computed per region as [R, points] vectors;
// the four corners are four index_selects of the input seen as [N*H*W, C]
// rows (channels last), so memory grows as R * points * C, not R * H * W.
#include "kiln/core/factory.h"
#include "kiln/onnx/import_context.h"
#include "kiln/onnx/import_util.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using jit::Value;
using Node = pb::NodeProto;

Value* number(ImportContext& c, double value, DType dtype) {
  return c.constant(full({}, value, dtype));
}

Value* reshape_to(ImportContext& c, Value* x, const DimList& shape) {
  if (same_dims(x->shape(), shape)) return x;
  return c.emit("reshape", {x}, {{"shape", shape}});
}

Value* column(ImportContext& c, Value* rois, int64_t k) {
  return c.emit("select", {rois}, {{"dim", int64_t(1)}, {"index", k}});
}

// Along one axis of `size` pixels: the sample points of every region,
// [R, bins * ratio], from its start and bin length ([R] each).
struct Axis {
  Value *low, *high;                // int64 pixel indices
  Value *low_weight, *high_weight;  // zero where the point is outside
};

Axis sample_axis(ImportContext& c, Value* start, Value* bin, int64_t bins, int64_t ratio,
                 int64_t size) {
  const DType dtype = start->dtype();
  // Where each point lies within its region, in bins: ph + (i + 0.5) / ratio.
  Tensor offsets = empty({bins * ratio}, DType::Float64);
  for (int64_t b = 0; b < bins; ++b)
    for (int64_t i = 0; i < ratio; ++i)
      offsets.data<double>()[b * ratio + i] = double(b) + (double(i) + 0.5) / double(ratio);
  Value* at = c.emit("cast", {c.constant(offsets)}, {{"dtype", dtype}});
  const Dim regions = start->shape()[0];
  Value* point = c.emit("add", {reshape_to(c, start, {regions, Dim(1)}),
                                c.emit("mul", {reshape_to(c, bin, {regions, Dim(1)}),
                                               reshape_to(c, at, {Dim(1), bins * ratio})})});
  Value* inside = c.emit("mul", {c.emit("ge", {point, number(c, -1.0, dtype)}),
                                 c.emit("le", {point, number(c, double(size), dtype)})});
  Value* clamped = c.emit("maximum", {point, number(c, 0.0, dtype)});
  Value* floor = c.emit("floor", {clamped});
  Value* at_edge = c.emit("ge", {floor, number(c, double(size - 1), dtype)});
  Value* last = number(c, double(size - 1), dtype);
  Value* low = c.emit("where", {at_edge, last, floor});
  Value* high = c.emit("where", {at_edge, last, c.emit("add", {floor, number(c, 1.0, dtype)})});
  Value* frac = c.emit("where", {at_edge, number(c, 0.0, dtype), c.emit("sub", {clamped, low})});
  Value* keep = c.emit("cast", {inside}, {{"dtype", dtype}});
  Value* high_weight = c.emit("mul", {frac, keep});
  Value* low_weight = c.emit("mul", {c.emit("sub", {number(c, 1.0, dtype), frac}), keep});
  auto index = [&](Value* v) { return c.emit("cast", {v}, {{"dtype", DType::Int64}}); };
  return {index(low), index(high), low_weight, high_weight};
}

void roi_align(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  Value* rois = c.input(node, 1);
  Value* batch = c.emit("cast", {c.input(node, 2)}, {{"dtype", DType::Int64}});
  const int64_t out_h = attr_int(node, "output_height", 1),
                out_w = attr_int(node, "output_width", 1);
  const int64_t ratio = attr_int(node, "sampling_ratio", 0);
  const double scale = attr_float(node, "spatial_scale", 1.f);
  const std::string mode = attr_string(node, "mode", "avg");
  // Opset 16 made half_pixel the default; before it, the only form was
  // output_half_pixel.
  const std::string transform = attr_string(node, "coordinate_transformation_mode",
                                            c.opset() >= 16 ? "half_pixel" : "output_half_pixel");
  KILN_CHECK(rank_of(x) == 4 && rank_of(rois) == 2 && out_h >= 1 && out_w >= 1,
             "onnx import: RoiAlign '", node.name(), "' needs a 4-D input and [R, 4] rois, got ",
             to_string(x->shape()), " and ", to_string(rois->shape()));
  KILN_CHECK(ratio > 0, "onnx import: RoiAlign '", node.name(), "' with sampling_ratio 0: the ",
             "number of sample points then follows each region's size, which kiln's ops, whose ",
             "sizes are known before they run, cannot express");
  KILN_CHECK(mode == "avg" || mode == "max", "onnx import: RoiAlign '", node.name(), "' mode '",
             mode, "' (avg or max)");
  KILN_CHECK(transform == "half_pixel" || transform == "output_half_pixel",
             "onnx import: RoiAlign '", node.name(), "' coordinate_transformation_mode '",
             transform, "'");
  const int64_t H = concrete_size(node, 0, x, 2, "RoiAlign's sampling"),
                W = concrete_size(node, 0, x, 3, "RoiAlign's sampling");
  const DType dtype = x->dtype();
  if (rois->dtype() != dtype) rois = c.emit("cast", {rois}, {{"dtype", dtype}});
  const bool half_pixel = transform == "half_pixel";
  const double offset = half_pixel ? 0.5 : 0.0;
  auto edge = [&](int64_t k) {
    return c.emit("sub", {c.emit("mul", {column(c, rois, k), number(c, scale, dtype)}),
                          number(c, offset, dtype)});
  };
  Value *x1 = edge(0), *y1 = edge(1), *x2 = edge(2), *y2 = edge(3);
  Value* width = c.emit("sub", {x2, x1});
  Value* height = c.emit("sub", {y2, y1});
  if (!half_pixel) {  // the legacy form makes every region at least a pixel wide
    width = c.emit("maximum", {width, number(c, 1.0, dtype)});
    height = c.emit("maximum", {height, number(c, 1.0, dtype)});
  }
  const Axis ys =
      sample_axis(c, y1, c.emit("div", {height, number(c, double(out_h), dtype)}), out_h, ratio, H);
  const Axis xs =
      sample_axis(c, x1, c.emit("div", {width, number(c, double(out_w), dtype)}), out_w, ratio, W);
  const Dim regions = rois->shape()[0], channels = x->shape()[1];
  const int64_t py = out_h * ratio, px = out_w * ratio;
  // The input as rows of channels, one per (n, y, x).
  Value* rows = reshape_to(c, c.emit("permute", {x}, {{"dims", IntList{0, 2, 3, 1}}}),
                           {x->shape()[0] * H * W, channels});
  Value* base = reshape_to(c, c.emit("mul", {batch, c.constant(full({}, H * W, DType::Int64))}),
                           {regions, Dim(1), Dim(1)});
  Value* combined = nullptr;
  for (int a = 0; a < 2; ++a) {
    for (int b = 0; b < 2; ++b) {
      Value* row = reshape_to(c, a ? ys.high : ys.low, {regions, Dim(py), Dim(1)});
      Value* col = reshape_to(c, b ? xs.high : xs.low, {regions, Dim(1), Dim(px)});
      Value* index = c.emit(
          "add", {base, c.emit("add", {c.emit("mul", {row, c.constant(full({}, W, DType::Int64))}),
                                       col})});
      Value* picked = c.emit("index_select", {rows, reshape_to(c, index, {regions * py * px})},
                             {{"dim", int64_t(0)}});
      Value* weight = c.emit(
          "mul",
          {reshape_to(c, a ? ys.high_weight : ys.low_weight, {regions, Dim(py), Dim(1), Dim(1)}),
           reshape_to(c, b ? xs.high_weight : xs.low_weight, {regions, Dim(1), Dim(px), Dim(1)})});
      Value* term =
          c.emit("mul", {reshape_to(c, picked, {regions, Dim(py), Dim(px), channels}), weight});
      if (!combined) {
        combined = term;
      } else {
        combined = c.emit(mode == "avg" ? "add" : "maximum", {combined, term});
      }
    }
  }
  Value* bins =
      reshape_to(c, combined, {regions, Dim(out_h), Dim(ratio), Dim(out_w), Dim(ratio), channels});
  Value* pooled = mode == "avg"
                      ? c.emit("mean", {bins}, {{"dims", IntList{2, 4}}, {"keepdim", false}})
                      : c.emit("amax", {bins}, {{"dims", IntList{2, 4}}, {"keepdim", false}});
  define(node, c, c.emit("permute", {pooled}, {{"dims", IntList{0, 3, 1, 2}}}));
}

}  // namespace

void add_detection_importers(Table& table) {
  table["RoiAlign"] = roi_align;
}

}  // namespace kiln::onnx
