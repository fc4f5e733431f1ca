// NonZero, Compress, Unique and NonMaxSuppression: ops whose output sizes
// depend on the input's values. Each becomes a kiln op that binds a size
// symbol when it runs (Note [Data-dependent output shapes] in
// ops/data_dependent.h), so the graph's later sizes are expressions over it.
#include "kiln/onnx/import_util.h"

namespace kiln::onnx {
namespace {

using jit::Value;

// kiln's nonzero gives [n, rank] (torch's layout); ONNX's NonZero gives its
// transpose, [rank, n]. A 0-d input counts as 1-D, as in numpy.
void import_nonzero(const pb::NodeProto& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  if (rank_of(x) == 0) x = c.emit("reshape", {x}, {{"shape", IntList{1}}});
  Value* rows = c.emit("nonzero", {x});
  define(node, c, c.emit("transpose", {rows}, {{"dim0", 0}, {"dim1", 1}}));
}

// The slices (along axis; elements of the flattened input without one)
// whose condition holds: index_select over condition's nonzero positions.
// A condition shorter than the axis leaves the slices past it out.
void import_compress(const pb::NodeProto& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  Value* condition = c.input(node, 1);
  KILN_CHECK_VALUE(rank_of(condition) == 1, "Compress: condition must be 1-D, got ",
                   condition->shape());
  int64_t axis = 0;
  if (has_attr(node, "axis")) {
    axis = wrap(attr_int(node, "axis", 0), rank_of(x));
    KILN_CHECK_VALUE(axis >= 0 && axis < rank_of(x), "Compress: axis ", attr_int(node, "axis", 0),
                     " is out of range for rank ", rank_of(x));
  } else {
    x = c.emit("reshape", {x}, {{"shape", IntList{-1}}});
  }
  Value* positions = c.emit("nonzero", {condition});  // [n, 1]
  Value* indices = c.emit("reshape", {positions}, {{"shape", IntList{-1}}});
  define(node, c, c.emit("index_select", {x, indices}, {{"dim", axis}}));
}

// Y, indices (of each value's first occurrence), inverse_indices (1-D:
// over the flattened input, or along axis) and counts.
void import_unique(const pb::NodeProto& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  Attrs attrs{{"sorted", attr_int(node, "sorted", 1) != 0}};
  if (has_attr(node, "axis")) attrs.set("dim", attr_int(node, "axis", 0));
  std::vector<Value*> outputs = c.emit_multi("unique", {x}, attrs);
  if (!has_attr(node, "axis"))
    outputs[2] = c.emit("reshape", {outputs[2]}, {{"shape", IntList{-1}}});
  for (int i = 0; i < node.output_size() && i < 4; ++i) {
    if (!node.output(i).empty()) define(node, c, outputs[size_t(i)], i);
  }
}

void import_nms(const pb::NodeProto& node, ImportContext& c) {
  std::vector<Value*> inputs;
  for (int i = 0; i < 5; ++i)
    inputs.push_back(i < node.input_size() ? c.input(node, i) : nullptr);
  const int64_t center_point_box = attr_int(node, "center_point_box", 0);
  KILN_CHECK_VALUE(center_point_box == 0 || center_point_box == 1,
                   "NonMaxSuppression: center_point_box must be 0 or 1, got ", center_point_box);
  define(node, c,
         c.emit("non_max_suppression", inputs, {{"center_point_box", center_point_box == 1}}));
}

}  // namespace

void add_dynamic_importers(Table& table) {
  table["NonZero"] = import_nonzero;
  table["Compress"] = import_compress;
  table["Unique"] = import_unique;
  table["NonMaxSuppression"] = import_nms;
}

}  // namespace kiln::onnx
