// View ops: view, transpose, permute, expand, squeeze, unsqueeze, narrow,
// select, slice, split, chunk. Each output is new shape/strides/offset over
// input 0's storage; no kernel runs. Also their backward rules, and
// slice_scatter/select_scatter (copies, not views) that those rules need.
// The API functions are in view_api.cpp.
//
// Each op is written once as a "rule" from the input's (shape, strides,
// offset) to the outputs'. Shape inference runs the same rule over
// contiguous strides and keeps only the shapes, so infer and view can never
// disagree. Only `view` depends on the real strides (whether the layout
// allows the new shape), so only its stride check waits for the view step.
#include <algorithm>

#include "kiln/core/factory.h"
#include "kiln/kernels/cpu/copy.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/grad_util.h"
#include "kiln/ops/registry.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/view.h"

namespace kiln {
namespace {

using ViewRule = std::vector<ViewMeta> (*)(const ViewMeta& in, const Attrs& attrs);

template <ViewRule rule>
InferResult infer_view(const InferArgs& args) {
  const TensorMeta& in = args.inputs[0];
  ViewMeta meta{in.shape, contiguous_strides(in.shape), 0};
  InferResult result;
  for (ViewMeta& out : rule(meta, args.attrs)) {
    result.outputs.push_back(TensorMeta{in.dtype, std::move(out.shape)});
  }
  return result;
}

template <ViewRule rule>
std::vector<ViewMeta> apply_view(const ViewArgs& args) {
  const Tensor& in = args.input;
  return rule(ViewMeta{in.shape(), in.strides(), in.offset()}, args.attrs);
}

int64_t ndim_of(const ViewMeta& m) {
  return int64_t(m.shape.size());
}

int64_t wrap(const ViewMeta& m, int64_t dim, const char* op) {
  return wrap_dim(dim, ndim_of(m), op, m.shape);
}

void check_not_scalar(const ViewMeta& m, const char* op) {
  KILN_CHECK_INDEX(!m.shape.empty(), op, "() cannot be applied to a 0-dim tensor");
}

std::vector<ViewMeta> view_rule(const ViewMeta& in, const Attrs& attrs) {
  IntList shape = infer_reshape(attrs.get_ints("shape"), numel_of(in.shape), "view", in.shape);
  std::optional<IntList> strides = view_strides(in.shape, in.strides, shape);
  KILN_CHECK(strides.has_value(), "view: cannot view a tensor of shape ", in.shape, " and strides ",
             in.strides, " as shape ", shape,
             ": view size is not compatible with input tensor's size and stride (at least one "
             "dimension spans across two contiguous subspaces). Use .reshape(...) instead.");
  return {ViewMeta{std::move(shape), std::move(*strides), in.offset}};
}

std::vector<ViewMeta> transpose_rule(const ViewMeta& in, const Attrs& attrs) {
  ViewMeta out = in;
  if (in.shape.empty()) {  // a 0-d tensor only has dims 0 and -1; nothing to swap
    wrap(in, attrs.get_int("dim0"), "transpose");
    wrap(in, attrs.get_int("dim1"), "transpose");
    return {out};
  }
  int64_t a = wrap(in, attrs.get_int("dim0"), "transpose");
  int64_t b = wrap(in, attrs.get_int("dim1"), "transpose");
  std::swap(out.shape[a], out.shape[b]);
  std::swap(out.strides[a], out.strides[b]);
  return {out};
}

std::vector<ViewMeta> permute_rule(const ViewMeta& in, const Attrs& attrs) {
  const IntList& dims = attrs.get_ints("dims");
  KILN_CHECK(int64_t(dims.size()) == ndim_of(in), "permute: number of dims ", dims,
             " doesn't match the tensor's number of dimensions ", ndim_of(in), " (shape ", in.shape,
             ")");
  ViewMeta out{IntList(dims.size()), IntList(dims.size()), in.offset};
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap(in, dims[i], "permute");
    KILN_CHECK(!seen[size_t(d)], "permute: duplicate dims are not allowed: ", dims, " (shape ",
               in.shape, ")");
    seen[size_t(d)] = true;
    out.shape[i] = in.shape[size_t(d)];
    out.strides[i] = in.strides[size_t(d)];
  }
  return {out};
}

// New leading dims and size-1 dims get stride 0, so every position along
// them reads the same element.
std::vector<ViewMeta> expand_rule(const ViewMeta& in, const Attrs& attrs) {
  const IntList& size = attrs.get_ints("size");
  int64_t n = int64_t(size.size());
  int64_t ndim = ndim_of(in);
  KILN_CHECK(n >= ndim, "expand: the number of sizes provided (", n,
             ") must be greater or equal to the number of dimensions in the tensor (", ndim,
             "); target sizes ", size, ", tensor shape ", in.shape);
  ViewMeta out{IntList(size_t(n)), IntList(size_t(n)), in.offset};
  for (int64_t i = n - 1; i >= 0; --i) {
    int64_t j = i - (n - ndim);  // the matching input dim, or < 0 for a new leading dim
    int64_t want = size[size_t(i)];
    if (j < 0) {
      KILN_CHECK(want >= 0, "expand: the expanded size of the tensor (", want,
                 ") isn't allowed in a leading, non-existing dimension ", i);
      out.shape[size_t(i)] = want;
      out.strides[size_t(i)] = 0;
      continue;
    }
    int64_t have = in.shape[size_t(j)];
    if (want == -1 || want == have) {
      out.shape[size_t(i)] = have;
      out.strides[size_t(i)] = in.strides[size_t(j)];
      continue;
    }
    KILN_CHECK(have == 1 && want >= 0, "expand: the expanded size of the tensor (", want,
               ") must match the existing size (", have, ") at non-singleton dimension ", i,
               ".  Target sizes: ", size, ".  Tensor sizes: ", in.shape);
    out.shape[size_t(i)] = want;
    out.strides[size_t(i)] = 0;
  }
  return {out};
}

// As in PyTorch, a listed dim whose size isn't 1 is left alone.
std::vector<ViewMeta> squeeze_rule(const ViewMeta& in, const Attrs& attrs) {
  std::vector<bool> drop(in.shape.size(), false);
  if (!attrs.has("dims")) {
    for (size_t d = 0; d < in.shape.size(); ++d)
      drop[d] = in.shape[d] == 1;
  } else {
    std::vector<bool> seen(std::max<size_t>(in.shape.size(), 1), false);
    for (int64_t dim : attrs.get_ints("dims")) {
      int64_t d = wrap(in, dim, "squeeze");
      KILN_CHECK(!seen[size_t(d)], "squeeze: dim ", d,
                 " appears multiple times in the list of dims ", attrs.get_ints("dims"));
      seen[size_t(d)] = true;
      if (!in.shape.empty()) drop[size_t(d)] = in.shape[size_t(d)] == 1;
    }
  }
  ViewMeta out{{}, {}, in.offset};
  for (size_t d = 0; d < in.shape.size(); ++d) {
    if (drop[d]) continue;
    out.shape.push_back(in.shape[d]);
    out.strides.push_back(in.strides[d]);
  }
  return {out};
}

std::vector<ViewMeta> unsqueeze_rule(const ViewMeta& in, const Attrs& attrs) {
  int64_t ndim = ndim_of(in);
  int64_t d = wrap_dim(attrs.get_int("dim"), ndim + 1, "unsqueeze", in.shape);
  // The stride that keeps the result contiguous when the input is.
  int64_t stride = d < ndim ? in.shape[size_t(d)] * in.strides[size_t(d)] : 1;
  ViewMeta out = in;
  out.shape.insert(out.shape.begin() + d, 1);
  out.strides.insert(out.strides.begin() + d, stride);
  return {out};
}

// The part [start, start + length) of dim `d`.
ViewMeta narrowed(const ViewMeta& in, int64_t d, int64_t start, int64_t length) {
  ViewMeta out = in;
  out.shape[size_t(d)] = length;
  out.offset += start * in.strides[size_t(d)];
  return out;
}

std::vector<ViewMeta> narrow_rule(const ViewMeta& in, const Attrs& attrs) {
  check_not_scalar(in, "narrow");
  int64_t d = wrap(in, attrs.get_int("dim"), "narrow");
  int64_t size = in.shape[size_t(d)];
  int64_t start = attrs.get_int("start");
  int64_t length = attrs.get_int("length");
  KILN_CHECK_INDEX(start >= -size && start <= size,
                   "narrow: start out of range (expected to be in range of [", -size, ", ", size,
                   "], but got ", start, ") for dim ", d, " of shape ", in.shape);
  if (start < 0) start += size;
  KILN_CHECK(length >= 0, "narrow: length must be non-negative, got ", length);
  KILN_CHECK(start + length <= size, "narrow: start (", start, ") + length (", length,
             ") exceeds dimension size (", size, ") at dim ", d, " of shape ", in.shape);
  return {narrowed(in, d, start, length)};
}

std::vector<ViewMeta> select_rule(const ViewMeta& in, const Attrs& attrs) {
  check_not_scalar(in, "select");
  int64_t d = wrap(in, attrs.get_int("dim"), "select");
  int64_t size = in.shape[size_t(d)];
  int64_t index = attrs.get_int("index");
  KILN_CHECK_INDEX(index >= -size && index < size, "select(): index ", index,
                   " out of range for tensor of size ", in.shape, " at dimension ", d);
  if (index < 0) index += size;
  ViewMeta out = in;
  out.offset += index * in.strides[size_t(d)];
  out.shape.erase(out.shape.begin() + d);
  out.strides.erase(out.strides.begin() + d);
  return {out};
}

// Python's slice clamping: out-of-range bounds are clipped, never an error.
int64_t clamp_slice_bound(int64_t bound, int64_t size) {
  if (bound < 0) bound += size;
  return std::clamp<int64_t>(bound, 0, size);
}

std::vector<ViewMeta> slice_rule(const ViewMeta& in, const Attrs& attrs) {
  check_not_scalar(in, "slice");
  int64_t d = wrap(in, attrs.get_int("dim"), "slice");
  int64_t size = in.shape[size_t(d)];
  int64_t step = attrs.get_int("step");
  KILN_CHECK_VALUE(step > 0, "slice: step must be positive, got ", step, " (dim ", d, ", shape ",
                   in.shape, ")");
  int64_t start = attrs.has("start") ? clamp_slice_bound(attrs.get_int("start"), size) : 0;
  int64_t end = attrs.has("end") ? clamp_slice_bound(attrs.get_int("end"), size) : size;
  end = std::max(end, start);
  ViewMeta out = narrowed(in, d, start, (end - start + step - 1) / step);
  out.strides[size_t(d)] *= step;
  return {out};
}

// The sizes split's outputs take along its dim, from either split_size
// (equal pieces, the last one smaller) or an explicit list.
IntList split_sizes(const ViewMeta& in, const Attrs& attrs, int64_t d) {
  int64_t size = in.shape[size_t(d)];
  KILN_CHECK_TYPE(attrs.has("split_size") != attrs.has("sizes"),
                  "split: expected exactly one of split_size and sizes");
  if (attrs.has("sizes")) {
    const IntList& sizes = attrs.get_ints("sizes");
    int64_t total = 0;
    for (int64_t s : sizes) {
      KILN_CHECK(s >= 0,
                 "split_with_sizes expects split_sizes have only non-negative entries, "
                 "but got split_sizes=",
                 sizes);
      total += s;
    }
    KILN_CHECK(total == size, "split_with_sizes expects split_sizes to sum exactly to ", size,
               " (input tensor's size at dimension ", d, "), but got split_sizes=", sizes,
               " (shape ", in.shape, ")");
    return sizes;
  }
  int64_t split_size = attrs.get_int("split_size");
  KILN_CHECK(split_size >= 0,
             "split expects split_size be non-negative, but got split_size=", split_size);
  KILN_CHECK(split_size > 0 || size == 0,
             "split_size can only be 0 if dimension size is 0, but got dimension size of ", size,
             " (dim ", d, ", shape ", in.shape, ")");
  if (size == 0) return {0};
  IntList sizes;
  for (int64_t start = 0; start < size; start += split_size) {
    sizes.push_back(std::min(split_size, size - start));
  }
  return sizes;
}

std::vector<ViewMeta> pieces_along(const ViewMeta& in, int64_t d, const IntList& sizes) {
  std::vector<ViewMeta> out;
  out.reserve(sizes.size());
  int64_t start = 0;
  for (int64_t length : sizes) {
    out.push_back(narrowed(in, d, start, length));
    start += length;
  }
  return out;
}

std::vector<ViewMeta> split_rule(const ViewMeta& in, const Attrs& attrs) {
  KILN_CHECK(!in.shape.empty(), "split expects at least a 1-dimensional tensor");
  int64_t d = wrap(in, attrs.get_int("dim"), "split");
  return pieces_along(in, d, split_sizes(in, attrs, d));
}

// PyTorch's rule: pieces of ceil(size / chunks), so there may be fewer than
// `chunks` of them; an empty dim still gives `chunks` empty pieces.
std::vector<ViewMeta> chunk_rule(const ViewMeta& in, const Attrs& attrs) {
  KILN_CHECK(!in.shape.empty(), "chunk expects at least a 1-dimensional tensor");
  int64_t chunks = attrs.get_int("chunks");
  KILN_CHECK(chunks > 0, "chunk expects `chunks` to be greater than 0, got: ", chunks);
  int64_t d = wrap(in, attrs.get_int("dim"), "chunk");
  int64_t size = in.shape[size_t(d)];
  if (size == 0) return pieces_along(in, d, IntList(size_t(chunks), 0));
  int64_t piece = (size + chunks - 1) / chunks;
  IntList sizes;
  for (int64_t start = 0; start < size; start += piece) {
    sizes.push_back(std::min(piece, size - start));
  }
  return pieces_along(in, d, sizes);
}

// ---- slice_scatter, select_scatter ----
// Not views: a copy of base with src written into the part the slice or
// select view of base would show. Views' backward rules need them ("the
// gradient placed into zeros"); as ops of their own they keep their history.
// They reuse the view rules, so the part can never disagree with the view.

template <ViewRule rule>
InferResult infer_scatter_into(const InferArgs& args) {
  const TensorMeta &base = args.inputs[0], &src = args.inputs[1];
  std::vector<ViewMeta> part =
      rule(ViewMeta{base.shape, contiguous_strides(base.shape), 0}, args.attrs);
  KILN_CHECK(src.shape == part[0].shape, args.op.name,
             ": expected src to have a size equal to the slice of self. src size = ", src.shape,
             ", slice size = ", part[0].shape);
  return InferResult{{TensorMeta{base.dtype, base.shape}}, {base.dtype, base.dtype}};
}

template <ViewRule rule>
void scatter_into_kernel(const KernelArgs& args) {
  const cpu::StridedView& out = args.outputs[0];
  cpu::copy_convert(out, args.inputs[0]);
  ViewMeta whole{IntList(out.shape, out.shape + out.ndim),
                 IntList(out.strides, out.strides + out.ndim), 0};
  ViewMeta part = rule(whole, args.attrs)[0];
  cpu::StridedView dst = out;
  dst.ndim = int(part.shape.size());
  std::copy(part.shape.begin(), part.shape.end(), dst.shape);
  std::copy(part.strides.begin(), part.strides.end(), dst.strides);
  dst.data = static_cast<char*>(out.data) + part.offset * int64_t(element_size(out.dtype));
  cpu::copy_convert(dst, args.inputs[1]);
}

// out = base outside the part, src inside it: base's gradient is the output
// gradient with the part zeroed, src's is the part of the output gradient.
template <const char* view_name>
std::vector<Tensor> scatter_into_grad(const GradContext& ctx) {
  static const OpDef& view_op = op(view_name);
  static const OpDef& scatter_op = op(std::string(view_name) + "_scatter");
  const Tensor& g = ctx.grad_output(0);
  Tensor g_base, g_src;
  if (ctx.needs_input_grad(0)) {
    const TensorMeta& src = ctx.input_meta(1);
    g_base = dispatch1(scatter_op, {g, zeros(src.shape, g.dtype())}, ctx.attrs());
  }
  if (ctx.needs_input_grad(1)) g_src = dispatch1(view_op, {g}, ctx.attrs());
  return {g_base, g_src};
}

constexpr char kSlice[] = "slice";
constexpr char kSelect[] = "select";

// ---- backward rules ----
// A view only moves elements, so its gradient moves them back: reshapes and
// permutations are undone, broadcasts are summed, and a part of the input
// gets its gradient placed into zeros of the input's shape (slice_scatter,
// select_scatter: ops of their own, so the result keeps its history).

const IntList& input_shape(const GradContext& ctx) {
  return ctx.input_meta(0).shape;
}

Tensor zeros_of_input(const GradContext& ctx) {
  return zeros(ctx.input_meta(0).shape, ctx.input_meta(0).dtype);
}

int64_t wrapped_attr_dim(const GradContext& ctx, const char* name) {
  int64_t ndim = int64_t(input_shape(ctx).size());
  int64_t dim = ctx.attrs().get_int(name);
  return dim < 0 ? dim + std::max<int64_t>(ndim, 1) : dim;
}

// view, squeeze, unsqueeze: same elements in the same order, so the
// gradient is the output gradient in the input's shape.
std::vector<Tensor> reshape_back_grad(const GradContext& ctx) {
  return {reshape(ctx.grad_output(0), input_shape(ctx))};
}

// transpose swaps two dims; swapping them again undoes it.
std::vector<Tensor> transpose_grad(const GradContext& ctx) {
  const Attrs& a = ctx.attrs();
  return {transpose(ctx.grad_output(0), a.get_int("dim0"), a.get_int("dim1"))};
}

// out dim i is input dim dims[i]: the inverse permutation puts them back.
std::vector<Tensor> permute_grad(const GradContext& ctx) {
  const IntList& dims = ctx.attrs().get_ints("dims");
  const int64_t ndim = int64_t(dims.size());
  IntList inverse(dims.size());
  for (int64_t i = 0; i < ndim; ++i) {
    int64_t d = dims[size_t(i)] < 0 ? dims[size_t(i)] + ndim : dims[size_t(i)];
    inverse[size_t(d)] = i;
  }
  return {permute(ctx.grad_output(0), inverse)};
}

// Every output element along an expanded dim reads the same input element:
// d expand(x) = sum over the expanded dims.
std::vector<Tensor> expand_grad(const GradContext& ctx) {
  return {sum_to(ctx.grad_output(0), input_shape(ctx))};
}

// x[start : start + length] along dim: the gradient lands there, zeros elsewhere.
std::vector<Tensor> narrow_grad(const GradContext& ctx) {
  const Attrs& a = ctx.attrs();
  const int64_t d = wrapped_attr_dim(ctx, "dim");
  int64_t start = a.get_int("start");
  if (start < 0) start += input_shape(ctx)[size_t(d)];
  return {slice_scatter(zeros_of_input(ctx), ctx.grad_output(0), d, start,
                        start + a.get_int("length"))};
}

std::vector<Tensor> select_grad(const GradContext& ctx) {
  const Attrs& a = ctx.attrs();
  return {select_scatter(zeros_of_input(ctx), ctx.grad_output(0), a.get_int("dim"),
                         a.get_int("index"))};
}

std::vector<Tensor> slice_grad(const GradContext& ctx) {
  const Attrs& a = ctx.attrs();
  auto bound = [&](const char* name) {
    return a.has(name) ? std::optional<int64_t>(a.get_int(name)) : std::nullopt;
  };
  return {slice_scatter(zeros_of_input(ctx), ctx.grad_output(0), a.get_int("dim"), bound("start"),
                        bound("end"), a.get_int("step"))};
}

// split, chunk: the pieces tile the input along dim in order, so their
// gradients (zeros for pieces that got none) are joined back with cat.
// GradContext does not count outputs; the op's own shape inference does.
std::vector<Tensor> pieces_grad(const GradContext& ctx, const OpDef& def) {
  const size_t count = infer_meta(def, {&ctx.input_meta(0), 1}, ctx.attrs()).outputs.size();
  std::vector<Tensor> pieces;
  for (size_t k = 0; k < count; ++k)
    pieces.push_back(ctx.grad_output(k));
  return {cat(pieces, wrapped_attr_dim(ctx, "dim"))};
}

std::vector<Tensor> split_grad(const GradContext& ctx) {
  static const OpDef& split_op = op("split");
  return pieces_grad(ctx, split_op);
}

std::vector<Tensor> chunk_grad(const GradContext& ctx) {
  static const OpDef& chunk_op = op("chunk");
  return pieces_grad(ctx, chunk_op);
}

template <ViewRule rule>
OpDef view_op(std::string name, std::vector<AttrSpec> attrs, std::string onnx_type, GradFn grad,
              int num_outputs = 1) {
  return OpDef{.name = std::move(name),
               .num_outputs = num_outputs,
               .attrs = std::move(attrs),
               .infer = infer_view<rule>,
               .view = apply_view<rule>,
               .grad = grad,
               .kind = OpKind::View,
               .onnx = {std::move(onnx_type)}};
}

}  // namespace

void register_view_ops(OpRegistry& registry) {
  const AttrValue none;
  registry.add(
      view_op<view_rule>("view", {{"shape", AttrKind::Ints, none}}, "Reshape", reshape_back_grad));
  registry.add(view_op<transpose_rule>(
      "transpose", {{"dim0", AttrKind::Int, none}, {"dim1", AttrKind::Int, none}}, "Transpose",
      transpose_grad));
  registry.add(view_op<permute_rule>("permute", {{"dims", AttrKind::Ints, none}}, "Transpose",
                                     permute_grad));
  registry.add(
      view_op<expand_rule>("expand", {{"size", AttrKind::Ints, none}}, "Expand", expand_grad));
  // dims None: every size-1 dim.
  registry.add(view_op<squeeze_rule>("squeeze", {{"dims", AttrKind::Ints, none, true}}, "Squeeze",
                                     reshape_back_grad));
  registry.add(view_op<unsqueeze_rule>("unsqueeze", {{"dim", AttrKind::Int, none}}, "Unsqueeze",
                                       reshape_back_grad));
  registry.add(view_op<narrow_rule>("narrow",
                                    {{"dim", AttrKind::Int, none},
                                     {"start", AttrKind::Int, none},
                                     {"length", AttrKind::Int, none}},
                                    "Slice", narrow_grad));
  registry.add(view_op<select_rule>("select",
                                    {{"dim", AttrKind::Int, none}, {"index", AttrKind::Int, none}},
                                    "Gather", select_grad));
  registry.add(view_op<slice_rule>("slice",
                                   {{"dim", AttrKind::Int, none},
                                    {"start", AttrKind::Int, none, true},
                                    {"end", AttrKind::Int, none, true},
                                    {"step", AttrKind::Int, int64_t(1)}},
                                   "Slice", slice_grad));
  // Exactly one of split_size and sizes is given (torch.split takes either).
  registry.add(view_op<split_rule>("split",
                                   {{"split_size", AttrKind::Int, none, true},
                                    {"sizes", AttrKind::Ints, none, true},
                                    {"dim", AttrKind::Int, int64_t(0)}},
                                   "Split", split_grad, -1));
  registry.add(OpDef{.name = "slice_scatter",
                     .min_inputs = 2,
                     .max_inputs = 2,
                     .attrs = {{"dim", AttrKind::Int, int64_t(0)},
                               {"start", AttrKind::Int, none, true},
                               {"end", AttrKind::Int, none, true},
                               {"step", AttrKind::Int, int64_t(1)}},
                     .infer = infer_scatter_into<slice_rule>,
                     .cpu = scatter_into_kernel<slice_rule>,
                     .grad = scatter_into_grad<kSlice>,
                     .onnx = {""}});
  registry.add(OpDef{.name = "select_scatter",
                     .min_inputs = 2,
                     .max_inputs = 2,
                     .attrs = {{"dim", AttrKind::Int, none}, {"index", AttrKind::Int, none}},
                     .infer = infer_scatter_into<select_rule>,
                     .cpu = scatter_into_kernel<select_rule>,
                     .grad = scatter_into_grad<kSelect>,
                     .onnx = {""}});
  registry.add(view_op<chunk_rule>(
      "chunk", {{"chunks", AttrKind::Int, none}, {"dim", AttrKind::Int, int64_t(0)}}, "Split",
      chunk_grad, -1));
}

}  // namespace kiln
