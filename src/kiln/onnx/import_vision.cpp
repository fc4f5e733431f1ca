// DeformConv (opset 19) as kiln's deform_conv2d, whose inputs are
// DeformConv's in ONNX's order (X, W, offset, B, mask). kiln's op pads
// both sides of a dim alike, so asymmetric pads become a zero pad of X
// first: the sampling reads zeros outside the input either way, so the
// result is the same. MaxRoiPool needs no translator here: max_roi_pool
// declares it as its one-to-one form (ops/roi_pool_ops.cpp).
#include <algorithm>

#include "kiln/onnx/import_context.h"
#include "kiln/onnx/import_util.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using jit::Value;
using Node = pb::NodeProto;

// A two-value attribute (strides, dilations), each value at least `least`.
IntList pair_attr(const Node& node, const std::string& name, int64_t least) {
  const IntList values = attr_ints(node, name, IntList{1, 1});
  KILN_CHECK(values.size() == 2 && values[0] >= least && values[1] >= least,
             "onnx import: DeformConv node '", node.name(), "': ", name,
             " must be two values of at least ", least, " for a 2-D convolution, got ",
             attr_to_string(values));
  return values;
}

void import_deform_conv(const Node& node, ImportContext& c) {
  Value *x = c.input(node, 0), *w = c.input(node, 1), *offset = c.input(node, 2);
  KILN_CHECK(x && w && offset, "onnx import: DeformConv node '", node.name(),
             "' needs inputs X, W and offset");
  KILN_CHECK(
      rank_of(x) == 4 && rank_of(w) == 4, "onnx import: DeformConv node '", node.name(),
      "': kiln reads the 2-D form (X [N, C, H, W], W [M, C / group, kH, kW]), got X of rank ",
      rank_of(x), " and W of rank ", rank_of(w));
  const IntList kernel = {concrete_size(node, 1, w, 2, "DeformConv's kernel height"),
                          concrete_size(node, 1, w, 3, "DeformConv's kernel width")};
  const IntList kernel_shape = attr_ints(node, "kernel_shape", kernel);
  KILN_CHECK(kernel_shape == kernel, "onnx import: DeformConv node '", node.name(),
             "': kernel_shape ", attr_to_string(kernel_shape), " differs from W's kernel ",
             attr_to_string(kernel));
  const IntList pads = attr_ints(node, "pads", IntList{0, 0, 0, 0});
  KILN_CHECK(pads.size() == 4 && *std::min_element(pads.begin(), pads.end()) >= 0,
             "onnx import: DeformConv node '", node.name(),
             "': pads must be four non-negative values [top, left, bottom, right], got ",
             attr_to_string(pads));
  IntList padding = {pads[0], pads[1]};
  if (pads[0] != pads[2] || pads[1] != pads[3]) {
    // kiln's pad takes (before, after) pairs from the last dim back.
    x = c.emit("pad", {x},
               {{"pad", IntList{pads[1], pads[3], pads[0], pads[2]}},
                {"mode", std::string("constant")},
                {"value", 0.0}});
    padding = {0, 0};
  }
  std::vector<Value*> inputs = {x, w, offset, c.input(node, 3), c.input(node, 4)};
  while (!inputs.back())
    inputs.pop_back();  // absent trailing B and mask
  define(node, c,
         c.emit("deform_conv2d", inputs,
                {{"stride", pair_attr(node, "strides", 1)},
                 {"padding", padding},
                 {"dilation", pair_attr(node, "dilations", 1)},
                 {"groups", attr_int(node, "group", 1)},
                 {"offset_groups", attr_int(node, "offset_group", 1)}}));
}

}  // namespace

void add_vision_importers(Table& table) {
  table["DeformConv"] = import_deform_conv;
}

}  // namespace kiln::onnx
