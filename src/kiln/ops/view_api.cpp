// The C++ API of the view ops (declared in view.h): each function is one
// dispatch of its op from view_ops.cpp; reshape picks view or the copying
// reshape op, as PyTorch does.
#include "kiln/core/sym_shape.h"
#include "kiln/core/trace_hook.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/view.h"

namespace kiln {
namespace {

// The sizes of the call being traced for a target that may be symbolic.
IntList traced_values(const DimList& dims) {
  if (is_static(dims)) return to_static(dims);
  const ShapeEnv* env = current_shape_env();
  KILN_CHECK(env != nullptr, "reshape: the target ", to_string(dims),
             " holds symbolic sizes, which only a trace with dynamic shapes can run");
  return evaluate(dims, env->hints());
}

}  // namespace

Tensor view(const Tensor& x, const IntList& shape) {
  static const OpDef& view_op = op("view");
  return dispatch1(view_op, {x}, {{"shape", shape}});
}

Tensor view(const Tensor& x, std::span<const Dim> shape) {
  static const OpDef& view_op = op("view");
  return dispatch1(view_op, {x}, {{"shape", DimList(shape.begin(), shape.end())}});
}

// A view when the strides allow one (PyTorch's rule), else a copy.
Tensor reshape(const Tensor& x, const IntList& shape) {
  // While a trace records, -1 may stand for a symbolic size: resolve it
  // over the recorded shape, not the example's numbers.
  if (trace_hook()) return reshape(x, to_dims(shape));
  IntList target = infer_reshape(shape, x.numel(), "reshape", x.shape());
  if (view_strides(x.shape(), x.strides(), target)) return view(x, target);
  static const OpDef& reshape_op = op("reshape");
  return dispatch1(reshape_op, {x}, {{"shape", target}});
}

Tensor reshape(const Tensor& x, std::span<const Dim> shape) {
  DimList in = sym_shape(x);
  DimList target = infer_reshape(DimList(shape.begin(), shape.end()), numel_of(in), "reshape", in);
  if (view_strides(x.shape(), x.strides(), traced_values(target))) return view(x, target);
  static const OpDef& reshape_op = op("reshape");
  return dispatch1(reshape_op, {x}, {{"shape", target}});
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  static const OpDef& transpose_op = op("transpose");
  return dispatch1(transpose_op, {x}, {{"dim0", dim0}, {"dim1", dim1}});
}

Tensor t(const Tensor& x) {
  KILN_CHECK(x.dim() <= 2, "t() expects a tensor with <= 2 dimensions, but self is ", x.dim(),
             "D (shape ", x.shape(), ")");
  return transpose(x, 0, x.dim() < 2 ? 0 : 1);
}

Tensor permute(const Tensor& x, const IntList& dims) {
  static const OpDef& permute_op = op("permute");
  return dispatch1(permute_op, {x}, {{"dims", dims}});
}

Tensor expand(const Tensor& x, const IntList& size) {
  static const OpDef& expand_op = op("expand");
  return dispatch1(expand_op, {x}, {{"size", size}});
}

Tensor expand(const Tensor& x, std::span<const Dim> size) {
  static const OpDef& expand_op = op("expand");
  return dispatch1(expand_op, {x}, {{"size", DimList(size.begin(), size.end())}});
}

Tensor expand_as(const Tensor& x, const Tensor& other) {
  if (trace_hook()) return expand(x, sym_shape(other));
  return expand(x, other.shape());
}

Tensor squeeze(const Tensor& x) {
  static const OpDef& squeeze_op = op("squeeze");
  return dispatch1(squeeze_op, {x});
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  static const OpDef& squeeze_op = op("squeeze");
  return dispatch1(squeeze_op, {x}, {{"dims", IntList{dim}}});
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  static const OpDef& unsqueeze_op = op("unsqueeze");
  return dispatch1(unsqueeze_op, {x}, {{"dim", dim}});
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  if (x.dim() == 0) return reshape(x, {1});
  int64_t start = wrap_dim(start_dim, x.dim(), "flatten", x.shape());
  int64_t end = wrap_dim(end_dim, x.dim(), "flatten", x.shape());
  KILN_CHECK(start <= end, "flatten() has invalid args: start_dim cannot come after end_dim (",
             start_dim, " and ", end_dim, " for shape ", x.shape(), ")");
  if (start == end) return x;
  // Over the recorded shape, so that a trace with dynamic shapes merges
  // symbols (batch*seq) rather than their example values.
  DimList in = sym_shape(x);
  DimList shape(in.begin(), in.begin() + start);
  Dim merged = 1;
  for (int64_t d = start; d <= end; ++d)
    merged *= in[size_t(d)];
  shape.push_back(merged);
  shape.insert(shape.end(), in.begin() + end + 1, in.end());
  if (is_static(shape)) return reshape(x, to_static(shape));
  return reshape(x, std::span<const Dim>(shape));
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  static const OpDef& narrow_op = op("narrow");
  return dispatch1(narrow_op, {x}, {{"dim", dim}, {"start", start}, {"length", length}});
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  static const OpDef& select_op = op("select");
  return dispatch1(select_op, {x}, {{"dim", dim}, {"index", index}});
}

Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
             int64_t step) {
  static const OpDef& slice_op = op("slice");
  auto or_none = [](std::optional<int64_t> v) -> AttrValue {
    return v ? AttrValue(*v) : AttrValue();
  };
  return dispatch1(
      slice_op, {x},
      {{"dim", dim}, {"start", or_none(start)}, {"end", or_none(end)}, {"step", step}});
}

Tensor slice_scatter(const Tensor& base, const Tensor& src, int64_t dim,
                     std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) {
  static const OpDef& slice_scatter_op = op("slice_scatter");
  auto or_none = [](std::optional<int64_t> v) -> AttrValue {
    return v ? AttrValue(*v) : AttrValue();
  };
  return dispatch1(
      slice_scatter_op, {base, src},
      {{"dim", dim}, {"start", or_none(start)}, {"end", or_none(end)}, {"step", step}});
}

Tensor select_scatter(const Tensor& base, const Tensor& src, int64_t dim, int64_t index) {
  static const OpDef& select_scatter_op = op("select_scatter");
  return dispatch1(select_scatter_op, {base, src}, {{"dim", dim}, {"index", index}});
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  static const OpDef& split_op = op("split");
  return dispatch(split_op, {x}, {{"split_size", split_size}, {"dim", dim}});
}

std::vector<Tensor> split(const Tensor& x, const IntList& sizes, int64_t dim) {
  static const OpDef& split_op = op("split");
  return dispatch(split_op, {x}, {{"sizes", sizes}, {"dim", dim}});
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  static const OpDef& chunk_op = op("chunk");
  return dispatch(chunk_op, {x}, {{"chunks", chunks}, {"dim", dim}});
}

}  // namespace kiln
