// Translations of ONNX's shape and indexing ops: Reshape, Squeeze, Concat,
// Shape, Expand, Gather, Slice, Split and kin. Shapes, axes and bounds that
// ONNX passes as tensors must be known at import: constants, or sizes
// computed from symbolic input shapes (Note [Known sizes] in
// import_sizes.cpp), which become symbolic attributes (a reshape to
// [batch, 512]); a Slice's bounds may be computed at run time where its
// length is not (Note [Bounds at run time] in import_run_time_bounds.cpp).
#include <algorithm>
#include <climits>

#include "kiln/core/factory.h"
#include "kiln/onnx/import_context.h"
#include "kiln/onnx/import_run_time_bounds.h"
#include "kiln/onnx/import_util.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using jit::Value;
using Node = pb::NodeProto;
using Relation = ShapeGuard::Relation;

bool is_one(const Dim& dim) {
  return dim.is_static() && dim.static_value() == 1;
}

Value* reshape_to(ImportContext& c, Value* x, const DimList& shape) {
  if (same_dims(x->shape(), shape)) return x;
  return c.emit("reshape", {x}, {{"shape", shape}});
}

// `x` with a symbolic size along `axis` taken as the static `size`, which
// the model relies on (a guard checks it on every call).
Value* assume_size(const Node& node, ImportContext& c, int input, Value* x, int64_t axis,
                   int64_t size) {
  c.assume(x->shape()[size_t(axis)], Relation::Eq, size,
           str(node.op_type(), " '", node.name(), "' takes axis ", axis, " of '", node.input(input),
               "' as ", size));
  return c.emit("narrow", {x}, {{"dim", axis}, {"start", int64_t(0)}, {"length", size}});
}

// ONNX's 0 copies the input's size (unless allowzero); -1 is inferred,
// as kiln's reshape does.
void reshape(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  DimList target = c.constant_sizes(c.input(node, 1), "Reshape's shape");
  bool allowzero = attr_int(node, "allowzero", 0) != 0;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i].is_static() && target[i].static_value() == 0 && !allowzero) {
      KILN_CHECK(i < x->shape().size(), "onnx import: Reshape copies dimension ", i,
                 " of an input of rank ", x->shape().size());
      target[i] = x->shape()[i];
    }
  }
  bool inferred = std::any_of(target.begin(), target.end(),
                              [](const Dim& d) { return d.is_static() && d.static_value() == -1; });
  Dim want = numel_of(target), have = numel_of(x->shape());
  if (inferred || want.same_as(have) || is_static({want, have}))
    return define(node, c, c.emit("reshape", {x}, {{"shape", target}}));
  // Sizes kiln cannot prove equal, such as a model that reshapes to a
  // fixed 1 where its input has ((h - 33) // 48 + 1): ONNX checks this when
  // it runs, and so does the guard.
  c.assume(want, Relation::Eq, have,
           str("Reshape '", node.name(), "' of '", node.input(0), "' to ", to_string(target)));
  define(node, c, c.emit_under_guards("reshape", {x}, {{"shape", target}}));
}

void flatten(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  int64_t axis = wrap(attr_int(node, "axis", 1), rank_of(x));
  Dim outer = 1, inner = 1;
  for (int64_t i = 0; i < rank_of(x); ++i)
    (i < axis ? outer : inner) *= x->shape()[size_t(i)];
  define(node, c, reshape_to(c, x, {outer, inner}));
}

// Without axes, the axes of size 1 go; a symbolic axis stays (the import
// cannot know it is 1). A listed symbolic axis must be 1: the import
// assumes it, as a guard, and narrows the axis to a static 1.
void squeeze(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  IntList axes = axes_of(node, c, 1, {});
  std::vector<bool> listed(size_t(rank_of(x)), axes.empty());
  if (!axes.empty()) {
    for (int64_t axis : axes)
      listed.at(size_t(wrap(axis, rank_of(x)))) = true;
  }
  DimList shape;
  for (int64_t i = 0; i < rank_of(x); ++i) {
    const Dim size = x->shape()[size_t(i)];
    if (listed[size_t(i)] && size.is_symbolic() && !axes.empty()) {
      x = assume_size(node, c, 0, x, i, 1);
      continue;
    }
    if (!listed[size_t(i)] || !is_one(size)) shape.push_back(size);
  }
  define(node, c, reshape_to(c, x, shape));
}

void unsqueeze(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  IntList axes = axes_of(node, c, 1, {});
  int64_t rank = rank_of(x) + int64_t(axes.size());
  std::vector<bool> inserted(size_t(rank), false);
  for (int64_t axis : axes)
    inserted.at(size_t(wrap(axis, rank))) = true;
  DimList shape;
  size_t next = 0;
  for (int64_t i = 0; i < rank; ++i)
    shape.push_back(inserted[size_t(i)] ? 1 : x->shape()[next++]);
  define(node, c, reshape_to(c, x, shape));
}

// Inputs agree but along the axis. Where one has a static size and
// another a symbolic one there, the symbolic one is assumed to be it (a
// model that joins an [n, c, (h - 33) // 48 + 1, w] to an [n, c, 1, w]).
void concat(const Node& node, ImportContext& c) {
  std::vector<Value*> inputs;
  for (int i = 0; i < node.input_size(); ++i)
    inputs.push_back(c.input(node, i));
  int64_t rank = rank_of(inputs.front());
  int64_t axis = wrap(attr_int(node, "axis", 0), rank);
  for (int64_t k = 0; k < rank; ++k) {
    if (k == axis) continue;
    std::optional<int64_t> fixed;
    for (const Value* input : inputs)
      if (rank_of(input) == rank && input->shape()[size_t(k)].is_static())
        fixed = input->shape()[size_t(k)].static_value();
    for (size_t i = 0; fixed && i < inputs.size(); ++i)
      if (rank_of(inputs[i]) == rank && inputs[i]->shape()[size_t(k)].is_symbolic())
        inputs[i] = assume_size(node, c, int(i), inputs[i], k, *fixed);
  }
  define(node, c, c.emit("cat", inputs, {{"dim", axis}}));
}

// The sizes themselves: a constant when static, symbolic sizes otherwise.
void shape(const Node& node, ImportContext& c) {
  const DimList& dims = c.input(node, 0)->shape();
  int64_t rank = int64_t(dims.size());
  int64_t start = std::clamp<int64_t>(wrap(attr_int(node, "start", 0), rank), 0, rank);
  int64_t end = std::clamp<int64_t>(wrap(attr_int(node, "end", rank), rank), 0, rank);
  DimList kept(dims.begin() + start, dims.begin() + std::max(start, end));
  define(node, c, c.sizes_value(kept, DType::Int64));
}

void size(const Node& node, ImportContext& c) {
  define(node, c, c.sizes_value({numel_of(c.input(node, 0)->shape())}, DType::Int64, true));
}

// A symbolic shape makes the fill value expanded at run time.
void constant_of_shape(const Node& node, ImportContext& c) {
  DimList shape = c.constant_sizes(c.input(node, 0), "ConstantOfShape's shape");
  Tensor fill = full({}, 0.0, DType::Float32);
  if (const pb::AttributeProto* value = find_attr(node, "value"))
    fill = tensor_from_proto(value->t(), c.folder());
  Scalar element = read_element(fill, 0);
  if (is_static(shape))
    return define(node, c, c.constant(full(to_static(shape), element, fill.dtype())));
  Value* scalar = c.constant(full({}, element, fill.dtype()));
  define(node, c, c.emit("expand", {scalar}, {{"size", shape}}));
}

// Both ways: a size-1 axis of the input takes the target's size, and a
// target of 1 keeps the input's.
void expand(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  DimList given = c.constant_sizes(c.input(node, 1), "Expand's shape");
  size_t rank = std::max(x->shape().size(), given.size());
  // Both padded with leading 1s to one rank.
  DimList in(rank - x->shape().size(), 1), target(rank - given.size(), 1);
  in.insert(in.end(), x->shape().begin(), x->shape().end());
  target.insert(target.end(), given.begin(), given.end());
  DimList out(rank);
  for (size_t i = 0; i < rank; ++i)
    out[i] = is_one(in[i]) ? target[i] : in[i];
  define(node, c, c.emit("expand", {reshape_to(c, x, in)}, {{"size", out}}));
}

// Whether `indices` are constants none of which counts from the end, or
// values known to be (a Loop's iteration number).
bool nonnegative_constant(ImportContext& c, const Value* indices) {
  if (c.marked_nonnegative(indices)) return true;
  if (!c.is_constant(indices)) return false;
  IntList values = indices->data().to_vector<int64_t>();
  return std::all_of(values.begin(), values.end(), [](int64_t i) { return i >= 0; });
}

// ONNX indices may count from the end: where(i < 0, i + size, i).
Value* wrap_negative(const Node& node, ImportContext& c, Value* indices, const Value* data,
                     int64_t axis) {
  if (nonnegative_constant(c, indices)) return indices;
  int64_t size =
      concrete_size(node, 0, data, axis, node.op_type() + " with indices that may be < 0");
  Value* negative = c.emit("lt", {indices, c.constant(full({}, int64_t(0), indices->dtype()))});
  Value* shifted = c.emit("add", {indices, c.constant(full({}, size, indices->dtype()))});
  return c.emit("where", {negative, shifted, indices});
}

// Gather along an axis with indices of any rank: index_select over the
// flattened indices, then the indices' shape in place of the axis. One
// index from the end along a symbolic axis is kiln's select.
void gather(const Node& node, ImportContext& c) {
  Value* data = c.input(node, 0);
  Value* indices = c.input(node, 1);
  int64_t axis = wrap(attr_int(node, "axis", 0), rank_of(data));
  bool symbolic = data->shape().at(size_t(axis)).is_symbolic();
  if (symbolic && c.is_constant(indices) && indices->shape().empty())
    return define(
        node, c,
        c.emit("select", {data}, {{"dim", axis}, {"index", indices->data().item<int64_t>()}}));
  indices = wrap_negative(node, c, indices, data, axis);
  Value* flat = reshape_to(c, indices, {numel_of(indices->shape())});
  Value* picked = c.emit("index_select", {data, flat}, {{"dim", axis}});
  DimList shape(data->shape().begin(), data->shape().begin() + axis);
  shape.insert(shape.end(), indices->shape().begin(), indices->shape().end());
  shape.insert(shape.end(), data->shape().begin() + axis + 1, data->shape().end());
  define(node, c, reshape_to(c, picked, shape));
}

void gather_elements(const Node& node, ImportContext& c) {
  Value* data = c.input(node, 0);
  int64_t axis = wrap(attr_int(node, "axis", 0), rank_of(data));
  Value* indices = wrap_negative(node, c, c.input(node, 1), data, axis);
  define(node, c, c.emit("gather", {data, indices}, {{"dim", axis}}));
}

// Bounds this large (INT64_MAX, INT32_MAX as exporters write them) mean
// "to the end", and as negative ones "from the start".
constexpr int64_t kToEnd = INT32_MAX;
constexpr int64_t kPastAnySize = 1'000'000'000;

// A bound of a slice along an axis of symbolic size, as a size. ONNX
// clamps bounds to the axis; the import assumes they lie within it (a
// guard every call checks) rather than carry min and max in every size
// that follows.
Dim slice_bound(ImportContext& c, const Dim& bound, const Dim& size, const std::string& reason) {
  if (bound.is_symbolic()) {  // a size such as seq - 2, which ONNX would count from the end if < 0
    if (!bound.expr().provably_nonnegative()) c.assume(0, Relation::Le, bound, reason);
    c.assume(bound, Relation::Le, size, reason);
    return bound;
  }
  int64_t value = bound.static_value();
  if (value >= kToEnd) return size;
  if (value <= -kToEnd) return 0;
  // Past any size an axis has (jax2tf writes 10^9 for "to the end"): the
  // clamped bound, assuming the axis is no longer.
  if (std::abs(value) >= kPastAnySize) {
    c.assume(size, Relation::Le, std::abs(value), reason);
    return value < 0 ? Dim(0) : size;
  }
  if (value != 0) c.assume(std::abs(value), Relation::Le, size, reason);
  return value < 0 ? size + value : Dim(value);
}

// The same slice where the axis or a bound is symbolic: kiln's narrow,
// whose start and length may be sizes.
Value* slice_symbolic(const Node& node, ImportContext& c, Value* x, int64_t axis, const Dim& start,
                      const Dim& end, int64_t step) {
  const Dim& size = x->shape()[size_t(axis)];
  KILN_CHECK(step == 1, "onnx import: Slice with step ", step, " along axis ", axis, " of '",
             node.input(0), "', whose size ", size, " or bounds are symbolic (kiln slices those ",
             "with step 1 only)");
  std::string reason = str("Slice '", node.name(), "' of '", node.input(0), "' along axis ", axis);
  Dim begin = slice_bound(c, start, size, reason);
  Dim length = slice_bound(c, end, size, reason) - begin;
  if (length.is_static() && length.static_value() < 0) length = 0;
  return c.emit_under_guards("narrow", {x}, {{"dim", axis}, {"start", begin}, {"length", length}});
}

// Slice: bounds from inputs (opset 10 on) or attributes; one kiln slice per axis.
// A negative step walks from start (clamped to [0, size - 1]) down to end
// (clamped to [-1, size - 1]), exclusive: a forward slice of the flipped
// axis, where index i is size - 1 - i.
Value* slice_backward(ImportContext& c, Value* x, int64_t axis, int64_t first, int64_t last,
                      int64_t step) {
  int64_t size = x->shape()[size_t(axis)].static_value();
  if (size == 0) return x;
  int64_t start = std::clamp<int64_t>(first < 0 ? first + size : first, 0, size - 1);
  int64_t end = std::clamp<int64_t>(last < 0 ? last + size : last, -1, size - 1);
  int64_t count = start > end ? (start - end + (-step) - 1) / (-step) : 0;
  Value* flipped = c.emit("flip", {x}, {{"dims", IntList{axis}}});
  int64_t begin = size - 1 - start;
  return c.emit("slice", {flipped},
                {{"dim", axis},
                 {"start", begin},
                 {"end", count == 0 ? begin : begin + (count - 1) * (-step) + 1},
                 {"step", -step}});
}

// One axis whose bounds are computed at run time, the end a constant past
// the start (Note [Bounds at run time]); null when the Slice is not that.
Value* slice_of_run_time_bounds(const Node& node, ImportContext& c, Value* x) {
  Value *starts = c.input(node, 1), *ends = c.input(node, 2);
  if (!starts || !ends || (c.known_sizes(starts) && c.known_sizes(ends))) return nullptr;
  IntList axes = {0};
  if (c.input(node, 3)) axes = c.constant_ints(c.input(node, 3), "Slice's axes");
  if (c.input(node, 4) && c.constant_ints(c.input(node, 4), "Slice's steps") != IntList{1})
    return nullptr;
  if (axes.size() != 1) return nullptr;
  return slice_at_run_time(c, x, wrap(axes[0], rank_of(x)), starts, ends);
}

void slice(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  bool inputs = c.input(node, 1) != nullptr;
  if (Value* sliced = inputs ? slice_of_run_time_bounds(node, c, x) : nullptr)
    return define(node, c, sliced);
  DimList starts = inputs ? c.constant_sizes(c.input(node, 1), "Slice's starts")
                          : to_dims(attr_ints(node, "starts", {}));
  DimList ends = inputs ? c.constant_sizes(c.input(node, 2), "Slice's ends")
                        : to_dims(attr_ints(node, "ends", {}));
  IntList axes, steps;
  if (inputs && c.input(node, 3)) axes = c.constant_ints(c.input(node, 3), "Slice's axes");
  if (!inputs) axes = attr_ints(node, "axes", {});
  if (inputs && c.input(node, 4)) steps = c.constant_ints(c.input(node, 4), "Slice's steps");
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(int64_t(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  KILN_CHECK(
      starts.size() == ends.size() && axes.size() == starts.size() && steps.size() == starts.size(),
      "onnx import: Slice's starts, ends, axes and steps differ in length");
  for (size_t i = 0; i < starts.size(); ++i) {
    KILN_CHECK(steps[i] != 0, "onnx import: Slice with step 0");
    int64_t axis = wrap(axes[i], rank_of(x));
    const Dim& dim = x->shape().at(size_t(axis));
    bool symbolic = dim.is_symbolic() || starts[i].is_symbolic() || ends[i].is_symbolic();
    if (steps[i] < 0) {
      KILN_CHECK(!symbolic, "onnx import: Slice with step ", steps[i], " over symbolic sizes");
      x = slice_backward(c, x, axis, starts[i].static_value(), ends[i].static_value(), steps[i]);
      continue;
    }
    if (symbolic) {
      x = slice_symbolic(node, c, x, axis, starts[i], ends[i], steps[i]);
      continue;
    }
    int64_t size = dim.static_value();
    int64_t first = starts[i].static_value(), last = ends[i].static_value();
    int64_t start = std::clamp<int64_t>(first < 0 ? first + size : first, 0, size);
    int64_t end = std::clamp<int64_t>(last < 0 ? last + size : last, 0, size);
    x = c.emit(
        "slice", {x},
        {{"dim", axis}, {"start", start}, {"end", std::max(start, end)}, {"step", steps[i]}});
  }
  define(node, c, x);
}

// Without sizes, equal parts, the last one smaller: (length + parts - 1)
// // parts each, which kiln's split takes as sizes also when symbolic.
void split(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  int64_t axis = wrap(attr_int(node, "axis", 0), rank_of(x));
  DimList sizes = c.input(node, 1) ? c.constant_sizes(c.input(node, 1), "Split's sizes")
                                   : to_dims(attr_ints(node, "split", {}));
  if (sizes.empty()) {
    int64_t parts = node.output_size();
    const Dim& length = x->shape().at(size_t(axis));
    Dim each = floordiv(length + (parts - 1), parts);
    for (int64_t i = 0; i + 1 < parts; ++i)
      sizes.push_back(each);
    sizes.push_back(length - each * (parts - 1));
    if (length.is_static()) {  // past the end when the parts do not fill it: empty
      for (int64_t i = 0; i < parts; ++i)
        sizes[size_t(i)] = std::max<int64_t>(
            0, std::min(each.static_value(), length.static_value() - i * each.static_value()));
    }
  }
  std::vector<Value*> parts = c.emit_multi("split", {x}, {{"sizes", sizes}, {"dim", axis}});
  for (int i = 0; i < node.output_size(); ++i)
    define(node, c, parts.at(size_t(i)), i);
}

}  // namespace

void add_shape_importers(Table& table) {
  table["Reshape"] = reshape;
  table["Flatten"] = flatten;
  table["Squeeze"] = squeeze;
  table["Unsqueeze"] = unsqueeze;
  table["Concat"] = concat;
  table["Shape"] = shape;
  table["Size"] = size;
  table["ConstantOfShape"] = constant_of_shape;
  table["Expand"] = expand;
  table["Gather"] = gather;
  table["GatherElements"] = gather_elements;
  table["Slice"] = slice;
  table["Split"] = split;
}

}  // namespace kiln::onnx
