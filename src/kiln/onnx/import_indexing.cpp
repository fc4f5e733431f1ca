// Translations of ONNX's gather, scatter and rearranging ops (GatherND,
// ScatterND, ScatterElements, OneHot, ReverseSequence, DepthToSpace,
// MaxUnpool, Range, ...) into kiln ops. N-dimensional indices become one
// linear index into the data flattened over the indexed axes (a dot with
// the axes' strides), so GatherND is one index_select and ScatterND one
// scatter along dim 0. Indices are read at run time; the sizes of the axes
// they index must be static where a translation needs them as numbers.
#include <algorithm>
#include <cmath>

#include "kiln/core/factory.h"
#include "kiln/onnx/import_context.h"
#include "kiln/onnx/import_run_time_bounds.h"
#include "kiln/onnx/import_util.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using jit::Value;
using Node = pb::NodeProto;

Value* int64_constant(ImportContext& c, int64_t value) {
  return c.constant(full({}, value, DType::Int64));
}

Value* reshape_to(ImportContext& c, Value* x, const DimList& shape) {
  if (same_dims(x->shape(), shape)) return x;
  return c.emit("reshape", {x}, {{"shape", shape}});
}

// The data of a value known at import (a constant or an initializer), or null.
const Tensor* known_data(ImportContext& c, const Value* x) {
  if (!x || c.holds_symbols(x)) return nullptr;
  if (x->kind() != jit::ValueKind::Constant && x->kind() != jit::ValueKind::Param) return nullptr;
  return x->data().defined() ? &x->data() : nullptr;
}

// A reshape whose sizes kiln cannot prove equal to the input's (h // 2 * 2
// for h): the model relies on them being so, which a guard checks on every
// call (ONNX checks it when the op runs).
Value* reshape_assumed(const Node& node, ImportContext& c, Value* x, const DimList& shape) {
  const Dim want = numel_of(shape), have = numel_of(x->shape());
  if (want.same_as(have) || is_static({want, have})) return reshape_to(c, x, shape);
  c.assume(
      want, ShapeGuard::Relation::Eq, have,
      str(node.op_type(), " '", node.name(), "' of '", node.input(0), "' as ", to_string(shape)));
  return c.emit_under_guards("reshape", {x}, {{"shape", shape}});
}

Value* as_int64(ImportContext& c, Value* x) {
  if (x->dtype() == DType::Int64) return x;
  return c.emit("cast", {x}, {{"dtype", DType::Int64}});
}

DimList part(const DimList& shape, size_t from, size_t to) {
  return DimList(shape.begin() + int64_t(from), shape.begin() + int64_t(to));
}

DimList joined(DimList a, const DimList& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// 0, 1, ..., n - 1 (int64): a constant when n is static, else a cumulative
// sum of ones, which runs at every size.
Value* iota(ImportContext& c, const Dim& n) {
  if (n.is_static()) return c.constant(arange(Scalar(n.static_value())));
  Value* ones =
      c.emit("expand", {c.constant(full({1}, int64_t(1), DType::Int64))}, {{"size", DimList{n}}});
  return c.emit("sub", {c.emit("cumsum", {ones}, {{"dim", int64_t(0)}}), int64_constant(c, 1)});
}

// Static sizes of `x`'s axes [from, to), which indices address as numbers.
IntList indexed_sizes(const Node& node, const Value* x, int64_t from, int64_t to) {
  IntList sizes;
  for (int64_t axis = from; axis < to; ++axis)
    sizes.push_back(concrete_size(node, 0, x, axis, node.op_type() + "'s indexed axes"));
  return sizes;
}

// Indices into axes of `sizes` (the last dim of `indices` picks the axis):
// wrapped from the end where negative, then as one linear index of the axes
// flattened in row-major order (-1 for a row with an index out of range).
// int64, of indices' shape without its last dim.
Value* linear_index(ImportContext& c, Value* indices, const IntList& sizes) {
  indices = as_int64(c, indices);
  const int64_t k = int64_t(sizes.size());
  Tensor size_data = empty({k}, DType::Int64), stride_data = empty({k}, DType::Int64);
  int64_t stride = 1;
  for (int64_t j = k - 1; j >= 0; --j) {
    size_data.data<int64_t>()[j] = sizes[size_t(j)];
    stride_data.data<int64_t>()[j] = stride;
    stride *= sizes[size_t(j)];
  }
  Value* negative = c.emit("lt", {indices, int64_constant(c, 0)});
  Value* wrapped =
      c.emit("where", {negative, c.emit("add", {indices, c.constant(size_data)}), indices});
  Value* scaled = c.emit("mul", {wrapped, c.constant(stride_data)});
  Value* linear = c.emit("sum", {scaled}, {{"dims", IntList{-1}}, {"keepdim", false}});
  // An index outside its axis could still land inside the flattened data
  // ([0, 7] of a [3, 4] is row 1's last): such rows get -1, which the
  // index_select or scatter reading them refuses, as ONNX Runtime does.
  Value* last = c.emit("sub", {c.constant(size_data), int64_constant(c, 1)});
  Value* clamped = c.emit("minimum", {c.emit("maximum", {wrapped, int64_constant(c, 0)}), last});
  Value* outside = c.emit(
      "amax", {c.emit("cast", {c.emit("ne", {clamped, wrapped})}, {{"dtype", DType::Int64}})},
      {{"dims", IntList{-1}}, {"keepdim", false}});
  Value* bad = c.emit("gt", {outside, int64_constant(c, 0)});
  return c.emit("where", {bad, int64_constant(c, -1), linear});
}

// ONNX indices along one axis may count from the end: where(i < 0, i + size, i).
Value* wrap_axis_index(const Node& node, ImportContext& c, Value* indices, const Value* data,
                       int64_t axis) {
  indices = as_int64(c, indices);
  if (c.is_constant(indices)) {
    IntList values = indices->data().to_vector<int64_t>();
    if (std::all_of(values.begin(), values.end(), [](int64_t i) { return i >= 0; })) return indices;
  }
  int64_t size =
      concrete_size(node, 0, data, axis, node.op_type() + " with indices that may be < 0");
  Value* negative = c.emit("lt", {indices, int64_constant(c, 0)});
  return c.emit("where", {negative, c.emit("add", {indices, int64_constant(c, size)}), indices});
}

// ONNX's scatter reductions: none, add and mul are kiln's scatter; max and
// min (opset 18) its scatter_reduce, which keeps what data holds too.
Value* scatter_with(const Node& node, ImportContext& c, Value* data, Value* index, Value* updates,
                    int64_t dim) {
  const std::string reduction = attr_string(node, "reduction", "none");
  if (reduction == "max" || reduction == "min")
    return c.emit("scatter_reduce", {data, index, updates},
                  {{"dim", dim},
                   {"reduce", std::string(reduction == "max" ? "amax" : "amin")},
                   {"include_self", true}});
  KILN_CHECK(reduction == "none" || reduction == "add" || reduction == "mul",
             "onnx import: ", node.op_type(), " '", node.name(), "' with reduction '", reduction,
             "' (none, add, mul, max, min)");
  return c.emit(
      "scatter", {data, index, updates},
      {{"dim", dim}, {"reduce", reduction == "mul" ? std::string("multiply") : reduction}});
}

// The one element of a 0-D (or one-element) constant.
double one_number(const Tensor& data, const std::string& what) {
  KILN_CHECK(data.numel() == 1, "onnx import: ", what, " must hold one number, got shape ",
             data.shape());
  return data.to_vector<double>()[0];
}

// ---- gather and scatter ----

// ScatterElements (and Scatter before opset 11): torch.scatter (or
// scatter_reduce) with ONNX's negative indices.
void scatter_elements(const Node& node, ImportContext& c) {
  Value* data = c.input(node, 0);
  int64_t axis = wrap(attr_int(node, "axis", 0), rank_of(data));
  Value* indices = wrap_axis_index(node, c, c.input(node, 1), data, axis);
  define(node, c, scatter_with(node, c, data, indices, c.input(node, 2), axis));
}

// GatherND: the last dim of indices (k) addresses axes [b, b + k) of data
// within each of the b leading batch axes. data is seen as
// [batch * indexed, rest] and every index as one row of it.
void gather_nd(const Node& node, ImportContext& c) {
  Value* data = c.input(node, 0);
  Value* indices = c.input(node, 1);
  const int64_t b = attr_int(node, "batch_dims", 0);
  const DimList& dshape = data->shape();
  const DimList& ishape = indices->shape();
  KILN_CHECK(!ishape.empty() && ishape.back().is_static(), "onnx import: GatherND '", node.name(),
             "' needs indices of rank >= 1 with a static last dim, got ", to_string(ishape));
  const int64_t k = ishape.back().static_value();
  KILN_CHECK(k >= 1 && b >= 0 && b + k <= rank_of(data) && b < int64_t(ishape.size()),
             "onnx import: GatherND '", node.name(), "' with batch_dims ", b, " and indices ",
             to_string(ishape), " does not fit data ", to_string(dshape));
  IntList sizes = indexed_sizes(node, data, b, b + k);
  Value* lin = linear_index(c, indices, sizes);  // [batch..., picks...]
  const Dim batch = numel_of(part(dshape, 0, size_t(b)));
  const Dim picks = numel_of(part(ishape, size_t(b), ishape.size() - 1));
  const Dim rest = numel_of(part(dshape, size_t(b + k), dshape.size()));
  const int64_t indexed = numel_of(sizes);
  if (b > 0) {  // each batch's rows start `indexed` further on
    Value* starts = c.emit("mul", {iota(c, batch), int64_constant(c, indexed)});
    lin =
        c.emit("add", {reshape_to(c, lin, {batch, picks}), reshape_to(c, starts, {batch, Dim(1)})});
  }
  Value* rows = reshape_to(c, data, {batch * indexed, rest});
  Value* picked =
      c.emit("index_select", {rows, reshape_to(c, lin, {batch * picks})}, {{"dim", int64_t(0)}});
  define(node, c,
         reshape_to(c, picked,
                    joined(part(ishape, 0, ishape.size() - 1),
                           part(dshape, size_t(b + k), dshape.size()))));
}

// ScatterND: each index row (the last dim of indices, k) names a slice of
// data's first k axes, which its update replaces or reduces into: a scatter
// along dim 0 of data seen as [indexed, rest].
void scatter_nd(const Node& node, ImportContext& c) {
  Value* data = c.input(node, 0);
  Value* indices = c.input(node, 1);
  Value* updates = c.input(node, 2);
  const DimList& dshape = data->shape();
  const DimList& ishape = indices->shape();
  KILN_CHECK(!ishape.empty() && ishape.back().is_static() && ishape.back().static_value() >= 1 &&
                 ishape.back().static_value() <= rank_of(data),
             "onnx import: ScatterND '", node.name(),
             "' needs indices with a static last dim in [1, ", rank_of(data), "], got ",
             to_string(ishape));
  const int64_t k = ishape.back().static_value();
  IntList sizes = indexed_sizes(node, data, 0, k);
  const Dim rows = numel_of(part(ishape, 0, ishape.size() - 1));
  const Dim rest = numel_of(part(dshape, size_t(k), dshape.size()));
  Value* lin = reshape_to(c, linear_index(c, indices, sizes), {rows, Dim(1)});
  Value* index = c.emit("expand", {lin}, {{"size", DimList{rows, rest}}});
  Value* scattered = scatter_with(node, c, reshape_to(c, data, {numel_of(sizes), rest}), index,
                                  reshape_to(c, updates, {rows, rest}), 0);
  define(node, c, reshape_to(c, scattered, dshape));
}

// OneHot(indices, depth, values): values[1] where an index (negative from
// the end of depth) equals the position along the new axis, values[0]
// elsewhere, also for indices out of range. depth sets a size, so it must
// be known at import.
void one_hot(const Node& node, ImportContext& c) {
  Value* indices = c.input(node, 0);
  const Tensor& depth_data = c.constant_data(c.input(node, 1), "OneHot's depth");
  KILN_CHECK(depth_data.numel() == 1, "onnx import: OneHot '", node.name(),
             "' needs one depth, got shape ", depth_data.shape());
  const int64_t depth = int64_t(depth_data.to_vector<double>()[0]);
  KILN_CHECK(depth >= 1, "onnx import: OneHot '", node.name(), "' with depth ", depth);
  Value* values = c.input(node, 2);
  const int64_t rank = rank_of(indices) + 1;
  const int64_t axis = wrap(attr_int(node, "axis", -1), rank);
  KILN_CHECK(axis >= 0 && axis < rank, "onnx import: OneHot '", node.name(), "' axis ",
             attr_int(node, "axis", -1), " out of range for output rank ", rank);
  // Compared in the indices' own type, as ONNX Runtime does: a float
  // index that is not a whole number is hot nowhere.
  const DType type = indices->dtype();
  Value* negative = c.emit("lt", {indices, c.constant(full({}, int64_t(0), type))});
  indices = c.emit(
      "where", {negative, c.emit("add", {indices, c.constant(full({}, depth, type))}), indices});
  Value* classes = c.emit("cast", {iota(c, depth)}, {{"dtype", type}});
  DimList index_shape = indices->shape(), class_shape(size_t(rank), Dim(1));
  index_shape.insert(index_shape.begin() + axis, Dim(1));
  class_shape[size_t(axis)] = depth;
  Value* hot =
      c.emit("eq", {reshape_to(c, indices, index_shape), reshape_to(c, classes, class_shape)});
  Value* flat_values = reshape_to(c, values, {2});
  Value* off = c.emit("select", {flat_values}, {{"dim", int64_t(0)}, {"index", int64_t(0)}});
  Value* on = c.emit("select", {flat_values}, {{"dim", int64_t(0)}, {"index", int64_t(1)}});
  define(node, c, c.emit("where", {hot, on, off}));
}

// ReverseSequence: along time_axis, the first sequence_lens[b] steps of
// batch b reversed, the rest kept: a gather along time of
// t < len ? len - 1 - t : t.
void reverse_sequence(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  Value* lens = as_int64(c, c.input(node, 1));
  const int64_t rank = rank_of(x);
  const int64_t time = wrap(attr_int(node, "time_axis", 0), rank);
  const int64_t batch = wrap(attr_int(node, "batch_axis", 1), rank);
  KILN_CHECK(rank >= 2 && time != batch && time >= 0 && time < 2 && batch >= 0 && batch < 2,
             "onnx import: ReverseSequence '", node.name(), "' needs time_axis and batch_axis 0 ",
             "and 1 (in either order) of an input of rank >= 2, got ", time, " and ", batch);
  const DimList& shape = x->shape();
  DimList time_shape(size_t(rank), Dim(1)), batch_shape(size_t(rank), Dim(1));
  time_shape[size_t(time)] = shape[size_t(time)];
  batch_shape[size_t(batch)] = shape[size_t(batch)];
  Value* t = reshape_to(c, iota(c, shape[size_t(time)]), time_shape);
  Value* len = reshape_to(c, lens, batch_shape);
  Value* reversed = c.emit("sub", {c.emit("sub", {len, int64_constant(c, 1)}), t});
  Value* source = c.emit("where", {c.emit("lt", {t, len}), reversed, t});
  Value* index = c.emit("expand", {source}, {{"size", shape}});
  define(node, c, c.emit("gather", {x, index}, {{"dim", time}}));
}

// ---- rearranging ----

// DepthToSpace moves blocks of channels into b x b spatial blocks: DCR
// reads the channels as [b, b, C'] (depth, column, row), CRD as [C', b, b].
void depth_to_space(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  const int64_t b = attr_int(node, "blocksize", 0);
  KILN_CHECK(rank_of(x) == 4 && b >= 1, "onnx import: DepthToSpace '", node.name(),
             "' needs a 4-D input and blocksize >= 1, got shape ", to_string(x->shape()),
             " and blocksize ", b);
  const bool crd = attr_string(node, "mode", "DCR") == "CRD";
  const DimList& s = x->shape();
  const Dim channels = floordiv(s[1], b * b);
  DimList split =
      crd ? DimList{s[0], channels, b, b, s[2], s[3]} : DimList{s[0], b, b, channels, s[2], s[3]};
  IntList order = crd ? IntList{0, 1, 4, 2, 5, 3} : IntList{0, 3, 4, 1, 5, 2};
  Value* moved = c.emit("permute", {reshape_assumed(node, c, x, split)}, {{"dims", order}});
  define(node, c, reshape_to(c, moved, {s[0], channels, s[2] * b, s[3] * b}));
}

// SpaceToDepth: each b x b spatial block becomes b * b channels, the block's
// row and column outermost.
void space_to_depth(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  const int64_t b = attr_int(node, "blocksize", 0);
  KILN_CHECK(rank_of(x) == 4 && b >= 1, "onnx import: SpaceToDepth '", node.name(),
             "' needs a 4-D input and blocksize >= 1, got shape ", to_string(x->shape()),
             " and blocksize ", b);
  const DimList& s = x->shape();
  const Dim h = floordiv(s[2], b), w = floordiv(s[3], b);
  Value* blocks = reshape_assumed(node, c, x, {s[0], s[1], h, b, w, b});
  Value* moved = c.emit("permute", {blocks}, {{"dims", IntList{0, 3, 5, 1, 2, 4}}});
  define(node, c, reshape_to(c, moved, {s[0], s[1] * b * b, h, w}));
}

// MaxUnpool: X's values written at the positions I names (MaxPool's
// indices, flat over the whole tensor) of the shape MaxPool with these
// kernel, strides and pads would have read, zeros elsewhere. A given
// output_shape pads that with zeros at the end of each axis: ONNX's
// reference does so and its backend cases expect it, where ONNX Runtime
// reads the indices as flat over output_shape instead (they agree when
// output_shape is the inferred shape).
void max_unpool(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  Value* indices = as_int64(c, c.input(node, 1));
  const int64_t spatial = rank_of(x) - 2;
  IntList kernel = attr_ints(node, "kernel_shape", {});
  IntList strides = attr_ints(node, "strides", IntList(size_t(std::max<int64_t>(spatial, 0)), 1));
  IntList pads = attr_ints(node, "pads", IntList(size_t(2 * std::max<int64_t>(spatial, 0)), 0));
  KILN_CHECK(spatial >= 1 && int64_t(kernel.size()) == spatial &&
                 int64_t(strides.size()) == spatial && int64_t(pads.size()) == 2 * spatial,
             "onnx import: MaxUnpool '", node.name(), "' with kernel_shape ", kernel, ", strides ",
             strides, " and pads ", pads, " for an input of shape ", to_string(x->shape()));
  DimList inferred = {x->shape()[0], x->shape()[1]};
  for (size_t i = 0; i < size_t(spatial); ++i)
    inferred.push_back((x->shape()[i + 2] - 1) * strides[i] - pads[i] - pads[i + size_t(spatial)] +
                       kernel[i]);
  const Dim count = numel_of(x->shape());
  Value* zeros = c.emit("expand", {c.constant(full({1}, 0.0, x->dtype()))},
                        {{"size", DimList{numel_of(inferred)}}});
  Value* scattered =
      c.emit("scatter", {zeros, reshape_to(c, indices, {count}), reshape_to(c, x, {count})},
             {{"dim", int64_t(0)}, {"reduce", std::string("none")}});
  Value* unpooled = reshape_to(c, scattered, inferred);
  Value* given = c.input(node, 2);
  if (!given) return define(node, c, unpooled);
  IntList out_shape = c.constant_ints(given, "MaxUnpool's output_shape");
  KILN_CHECK(out_shape.size() == inferred.size(), "onnx import: MaxUnpool '", node.name(),
             "' output_shape ", out_shape, " for an output of rank ", inferred.size());
  IntList pad;  // kiln's pad lists the last axis first
  for (size_t i = inferred.size(); i-- > 0;) {
    const int64_t have = concrete_size(node, 0, unpooled, int64_t(i), "MaxUnpool's output_shape");
    KILN_CHECK(out_shape[i] >= have, "onnx import: MaxUnpool '", node.name(), "' output_shape ",
               out_shape, " is smaller than the unpooled shape ", to_string(inferred));
    pad.push_back(0);
    pad.push_back(out_shape[i] - have);
  }
  define(
      node, c,
      c.emit("pad", {unpooled}, {{"pad", pad}, {"mode", std::string("constant")}, {"value", 0.0}}));
}

// Range(start, limit, delta): start + i * delta for i < ceil((limit - start) /
// delta). Its length is a size, so the bounds must be known at import:
// constants, or sizes (Range(0, seq_len, 1)) from symbolic input shapes.
void range(const Node& node, ImportContext& c) {
  Value* start = c.input(node, 0);
  Value* limit = c.input(node, 1);
  Value* delta = c.input(node, 2);
  const DType dtype = start->dtype();
  const Tensor *start_data = known_data(c, start), *limit_data = known_data(c, limit),
               *delta_data = known_data(c, delta);
  if (start_data && limit_data && delta_data) {
    const double first = one_number(*start_data, "Range's start");
    const double step = one_number(*delta_data, "Range's delta");
    const double end = one_number(*limit_data, "Range's limit");
    KILN_CHECK(step != 0, "onnx import: Range '", node.name(), "' with delta 0");
    const int64_t n = std::max<int64_t>(int64_t(std::ceil((end - first) / step)), 0);
    Tensor data = empty({n}, DType::Float64);
    for (int64_t i = 0; i < n; ++i)
      data.data<double>()[i] = first + double(i) * step;
    Value* values = c.constant(data);
    return define(node, c, c.emit("cast", {values}, {{"dtype", dtype}}));
  }
  // Whole-number bounds that are sizes (float ones too: Range(0.0,
  // float(w), 1.0)): the length is a size expression.
  auto bound = [&](Value* value) -> std::optional<DimList> {
    if (std::optional<DimList> sizes = c.known_sizes(value)) return sizes;
    const Tensor* data = known_data(c, value);  // a weight of 0.0 or 1.0
    if (!data || data->numel() != 1) return std::nullopt;
    const double number = one_number(*data, "Range's bound");
    if (number != std::trunc(number)) return std::nullopt;
    return DimList{int64_t(number)};
  };
  std::optional<DimList> first = bound(start), end = bound(limit), step = bound(delta);
  const bool sizes = first && end && step && first->size() == 1 && end->size() == 1 &&
                     step->size() == 1 && (*first)[0].is_static() && (*step)[0].is_static() &&
                     (*step)[0].static_value() > 0;
  if (!sizes) {
    // Bounds computed at run time whose difference is not (Note [Bounds at
    // run time] in import_run_time_bounds.cpp).
    if (Value* values = range_at_run_time(c, start, limit, delta)) return define(node, c, values);
    // Bounds computed at run time: the length must be a number at import,
    // so the model is specialized on the inputs they come from (Note
    // [Value inputs] in import_context.cpp), all three asked for at once.
    c.request_at_import({start, limit, delta});
    for (Value* bound : {start, limit, delta})
      if (!known_data(c, bound)) c.constant_data(bound, "Range's bounds (its length)");
    KILN_CHECK(false, "onnx import: Range '", node.name(), "' with a delta of 0 or below ",
               "and a symbolic limit");
  }
  const int64_t s0 = (*first)[0].static_value(), d = (*step)[0].static_value();
  Dim n = floordiv((*end)[0] - s0 + (d - 1), d);
  if (n.is_static()) n = std::max<int64_t>(n.static_value(), 0);
  if (!n.is_static() && !n.expr().provably_nonnegative())
    c.assume(0, ShapeGuard::Relation::Le, n,
             str("Range '", node.name(), "' up to '", node.input(1), "' has a length >= 0"));
  Value* positions =
      c.emit("add", {c.emit("mul", {iota(c, n), int64_constant(c, d)}), int64_constant(c, s0)});
  define(node, c, c.emit("cast", {positions}, {{"dtype", dtype}}));
}

}  // namespace

void add_einsum_importers(Table& table);     // import_einsum.cpp
void add_detection_importers(Table& table);  // import_detection.cpp
void add_tfidf_importers(Table& table);      // import_tfidf.cpp

void add_indexing_importers(Table& table) {
  add_einsum_importers(table);
  add_detection_importers(table);
  add_tfidf_importers(table);
  table["GatherND"] = gather_nd;
  table["ScatterND"] = scatter_nd;
  table["ScatterElements"] = scatter_elements;
  table["Scatter"] = scatter_elements;
  table["OneHot"] = one_hot;
  table["ReverseSequence"] = reverse_sequence;
  table["DepthToSpace"] = depth_to_space;
  table["SpaceToDepth"] = space_to_depth;
  table["MaxUnpool"] = max_unpool;
  table["Range"] = range;
}

}  // namespace kiln::onnx
