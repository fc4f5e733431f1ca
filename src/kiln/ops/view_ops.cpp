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

// A rule is written once over the integer type I: int64_t for the views of
// real tensors, Dim for shape inference, where sizes may be symbolic.
template <typename I>
using Meta = BasicViewMeta<I>;
template <typename I>
using Ints = std::vector<I>;

template <typename I>
I int_attr(const Attrs& attrs, const char* name) {
  if constexpr (std::is_same_v<I, Dim>) {
    return attrs.get_dim(name);
  } else {
    return attrs.get_int(name);
  }
}

template <typename I>
Ints<I> ints_attr(const Attrs& attrs, const char* name) {
  if constexpr (std::is_same_v<I, Dim>) {
    return attrs.get_dims(name);
  } else {
    return attrs.get_ints(name);
  }
}

#define KILN_VIEW_RULE(name) \
  template <typename I>      \
  std::vector<Meta<I>> name(const Meta<I>& in, const Attrs& attrs)

// Shape inference runs the rule over contiguous strides and keeps only the
// shapes; static inputs take the integer rule, as a real view would.
template <template <typename> class Rule>
std::vector<DimList> view_shapes(const DimList& in, const Attrs& attrs) {
  std::vector<DimList> shapes;
  bool symbolic_attr = std::any_of(attrs.items().begin(), attrs.items().end(),
                                   [](const auto& kv) { return attr_is_symbolic(kv.second); });
  if (is_static(in) && !symbolic_attr) {
    IntList shape = to_static(in);
    for (ViewMeta& out : Rule<int64_t>::apply(ViewMeta{shape, contiguous_strides(shape), 0}, attrs))
      shapes.push_back(to_dims(out.shape));
    return shapes;
  }
  for (Meta<Dim>& out : Rule<Dim>::apply(Meta<Dim>{in, contiguous_strides(in), 0}, attrs))
    shapes.push_back(std::move(out.shape));
  return shapes;
}

template <template <typename> class Rule>
InferResult infer_view(const InferArgs& args) {
  const TensorMeta& in = args.inputs[0];
  InferResult result;
  for (DimList& shape : view_shapes<Rule>(in.shape, args.attrs))
    result.outputs.push_back(TensorMeta{in.dtype, std::move(shape)});
  return result;
}

template <template <typename> class Rule>
std::vector<ViewMeta> apply_view(const ViewArgs& args) {
  const Tensor& in = args.input;
  return Rule<int64_t>::apply(ViewMeta{in.shape(), in.strides(), in.offset()}, args.attrs);
}

template <typename I>
int64_t ndim_of(const Meta<I>& m) {
  return int64_t(m.shape.size());
}

template <typename I>
int64_t wrap(const Meta<I>& m, int64_t dim, const char* op) {
  return wrap_dim(dim, ndim_of(m), op, m.shape);
}

template <typename I>
void check_not_scalar(const Meta<I>& m, const char* op) {
  KILN_CHECK_INDEX(!m.shape.empty(), op, "() cannot be applied to a 0-dim tensor");
}

KILN_VIEW_RULE(view_rule) {
  Ints<I> shape = infer_reshape(ints_attr<I>(attrs, "shape"), numel_of(in.shape), "view", in.shape);
  if constexpr (std::is_same_v<I, Dim>) {
    // Inference: the input is taken as contiguous, which any shape can view.
    Ints<I> strides = contiguous_strides(shape);
    return {Meta<I>{std::move(shape), std::move(strides), in.offset}};
  } else {
    std::optional<IntList> strides = view_strides(in.shape, in.strides, shape);
    KILN_CHECK(strides.has_value(), "view: cannot view a tensor of shape ", in.shape,
               " and strides ", in.strides, " as shape ", shape,
               ": view size is not compatible with input tensor's size and stride (at least one "
               "dimension spans across two contiguous subspaces). Use .reshape(...) instead.");
    return {Meta<I>{std::move(shape), std::move(*strides), in.offset}};
  }
}

KILN_VIEW_RULE(transpose_rule) {
  Meta<I> out = in;
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

KILN_VIEW_RULE(permute_rule) {
  const IntList& dims = attrs.get_ints("dims");
  KILN_CHECK(int64_t(dims.size()) == ndim_of(in), "permute: number of dims ", dims,
             " doesn't match the tensor's number of dimensions ", ndim_of(in), " (shape ", in.shape,
             ")");
  Meta<I> out{Ints<I>(dims.size()), Ints<I>(dims.size()), in.offset};
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
KILN_VIEW_RULE(expand_rule) {
  const Ints<I> size = ints_attr<I>(attrs, "size");
  int64_t n = int64_t(size.size());
  int64_t ndim = ndim_of(in);
  KILN_CHECK(n >= ndim, "expand: the number of sizes provided (", n,
             ") must be greater or equal to the number of dimensions in the tensor (", ndim,
             "); target sizes ", size, ", tensor shape ", in.shape);
  Meta<I> out{Ints<I>(size_t(n)), Ints<I>(size_t(n)), in.offset};
  for (int64_t i = n - 1; i >= 0; --i) {
    int64_t j = i - (n - ndim);  // the matching input dim, or < 0 for a new leading dim
    const I& want = size[size_t(i)];
    if (j < 0) {
      KILN_CHECK(!definitely_less(want, 0), "expand: the expanded size of the tensor (", want,
                 ") isn't allowed in a leading, non-existing dimension ", i);
      out.shape[size_t(i)] = want;
      out.strides[size_t(i)] = 0;
      continue;
    }
    const I& have = in.shape[size_t(j)];
    if (want == I(-1) || want == have) {
      out.shape[size_t(i)] = have;
      out.strides[size_t(i)] = in.strides[size_t(j)];
      continue;
    }
    KILN_CHECK(have == I(1) && !definitely_less(want, 0),
               "expand: the expanded size of the tensor (", want,
               ") must match the existing size (", have, ") at non-singleton dimension ", i,
               ".  Target sizes: ", size, ".  Tensor sizes: ", in.shape);
    out.shape[size_t(i)] = want;
    out.strides[size_t(i)] = 0;
  }
  return {out};
}

// As in PyTorch, a listed dim whose size isn't 1 is left alone.
KILN_VIEW_RULE(squeeze_rule) {
  std::vector<bool> drop(in.shape.size(), false);
  if (!attrs.has("dims")) {
    for (size_t d = 0; d < in.shape.size(); ++d)
      drop[d] = in.shape[d] == I(1);
  } else {
    std::vector<bool> seen(std::max<size_t>(in.shape.size(), 1), false);
    for (int64_t dim : attrs.get_ints("dims")) {
      int64_t d = wrap(in, dim, "squeeze");
      KILN_CHECK(!seen[size_t(d)], "squeeze: dim ", d,
                 " appears multiple times in the list of dims ", attrs.get_ints("dims"));
      seen[size_t(d)] = true;
      if (!in.shape.empty()) drop[size_t(d)] = in.shape[size_t(d)] == I(1);
    }
  }
  Meta<I> out{{}, {}, in.offset};
  for (size_t d = 0; d < in.shape.size(); ++d) {
    if (drop[d]) continue;
    out.shape.push_back(in.shape[d]);
    out.strides.push_back(in.strides[d]);
  }
  return {out};
}

KILN_VIEW_RULE(unsqueeze_rule) {
  int64_t ndim = ndim_of(in);
  int64_t d = wrap_dim(attrs.get_int("dim"), ndim + 1, "unsqueeze", in.shape);
  // The stride that keeps the result contiguous when the input is.
  I stride = d < ndim ? in.shape[size_t(d)] * in.strides[size_t(d)] : I(1);
  Meta<I> out = in;
  out.shape.insert(out.shape.begin() + d, I(1));
  out.strides.insert(out.strides.begin() + d, stride);
  return {out};
}

// The part [start, start + length) of dim `d`.
template <typename I>
I div_floor(const I& a, int64_t d) {
  if constexpr (std::is_same_v<I, Dim>) {
    return floordiv(a, d);
  } else {
    return a >= 0 ? a / d : -((-a + d - 1) / d);
  }
}

template <typename I>
Meta<I> narrowed(const Meta<I>& in, int64_t d, const I& start, const I& length) {
  Meta<I> out = in;
  out.shape[size_t(d)] = length;
  out.offset += start * in.strides[size_t(d)];
  return out;
}

KILN_VIEW_RULE(narrow_rule) {
  check_not_scalar(in, "narrow");
  int64_t d = wrap(in, attrs.get_int("dim"), "narrow");
  const I size = in.shape[size_t(d)];
  I start = int_attr<I>(attrs, "start");
  const I length = int_attr<I>(attrs, "length");
  KILN_CHECK_INDEX(!definitely_less(start, -size) && !definitely_less(size, start),
                   "narrow: start out of range (expected to be in range of [", -size, ", ", size,
                   "], but got ", start, ") for dim ", d, " of shape ", in.shape);
  if (start < I(0)) start += size;
  KILN_CHECK(!definitely_less(length, 0), "narrow: length must be non-negative, got ", length);
  KILN_CHECK(!definitely_less(size, start + length), "narrow: start (", start, ") + length (",
             length, ") exceeds dimension size (", size, ") at dim ", d, " of shape ", in.shape);
  return {narrowed(in, d, start, length)};
}

KILN_VIEW_RULE(select_rule) {
  check_not_scalar(in, "select");
  int64_t d = wrap(in, attrs.get_int("dim"), "select");
  const I size = in.shape[size_t(d)];
  I index = int_attr<I>(attrs, "index");
  KILN_CHECK_INDEX(!definitely_less(index, -size) && !definitely_less(size, index + 1),
                   "select(): index ", index, " out of range for tensor of size ", in.shape,
                   " at dimension ", d);
  if (index < I(0)) index += size;
  Meta<I> out = in;
  out.offset += index * in.strides[size_t(d)];
  out.shape.erase(out.shape.begin() + d);
  out.strides.erase(out.strides.begin() + d);
  return {out};
}

// Python's slice clamping: out-of-range bounds are clipped, never an error.
template <typename I>
I clamp_slice_bound(I bound, const I& size) {
  if (bound < I(0)) bound += size;
  if (bound < I(0)) return I(0);
  if (size < bound) return size;
  return bound;
}

KILN_VIEW_RULE(slice_rule) {
  check_not_scalar(in, "slice");
  int64_t d = wrap(in, attrs.get_int("dim"), "slice");
  const I size = in.shape[size_t(d)];
  int64_t step = attrs.get_int("step");
  KILN_CHECK_VALUE(step > 0, "slice: step must be positive, got ", step, " (dim ", d, ", shape ",
                   in.shape, ")");
  I start = attrs.has("start") ? clamp_slice_bound(int_attr<I>(attrs, "start"), size) : I(0);
  I end = attrs.has("end") ? clamp_slice_bound(int_attr<I>(attrs, "end"), size) : size;
  if (end < start) end = start;
  Meta<I> out = narrowed(in, d, start, div_floor(end - start + (step - 1), step));
  out.strides[size_t(d)] *= step;
  return {out};
}

// Pieces of `piece` along a dim of `size` > 0, the last one what is left.
// Each piece asks only whether another follows it, so a symbolic size gets
// guards that fix the number of pieces and nothing more: the last piece's
// length, full or not, is the expression size - start.
template <typename I>
Ints<I> pieces_of(const I& size, const I& piece) {
  Ints<I> sizes;
  for (I start = 0; start < size; start += piece)
    sizes.push_back(start + piece < size ? piece : size - start);
  return sizes;
}

// The sizes split's outputs take along its dim, from either split_size
// (equal pieces, the last one smaller) or an explicit list.
template <typename I>
Ints<I> split_sizes(const Meta<I>& in, const Attrs& attrs, int64_t d) {
  const I size = in.shape[size_t(d)];
  KILN_CHECK_TYPE(attrs.has("split_size") != attrs.has("sizes"),
                  "split: expected exactly one of split_size and sizes");
  if (attrs.has("sizes")) {
    const Ints<I> sizes = ints_attr<I>(attrs, "sizes");
    I total = 0;
    for (const I& s : sizes) {
      KILN_CHECK(!definitely_less(s, 0),
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
  // The number of pieces depends on the size: a symbolic size needs its
  // example value here, and the count becomes a guard.
  int64_t split_size = attrs.get_int("split_size");
  KILN_CHECK(split_size >= 0,
             "split expects split_size be non-negative, but got split_size=", split_size);
  KILN_CHECK(split_size > 0 || size == I(0),
             "split_size can only be 0 if dimension size is 0, but got dimension size of ", size,
             " (dim ", d, ", shape ", in.shape, ")");
  if (size <= I(split_size)) return {size};  // one piece, maybe empty
  return pieces_of(size, I(split_size));
}

template <typename I>
std::vector<Meta<I>> pieces_along(const Meta<I>& in, int64_t d, const Ints<I>& sizes) {
  std::vector<Meta<I>> out;
  out.reserve(sizes.size());
  I start = 0;
  for (const I& length : sizes) {
    out.push_back(narrowed(in, d, start, length));
    start += length;
  }
  return out;
}

KILN_VIEW_RULE(split_rule) {
  KILN_CHECK(!in.shape.empty(), "split expects at least a 1-dimensional tensor");
  int64_t d = wrap(in, attrs.get_int("dim"), "split");
  return pieces_along(in, d, split_sizes(in, attrs, d));
}

// PyTorch's rule: pieces of ceil(size / chunks), so there may be fewer than
// `chunks` of them; an empty dim still gives `chunks` empty pieces.
KILN_VIEW_RULE(chunk_rule) {
  KILN_CHECK(!in.shape.empty(), "chunk expects at least a 1-dimensional tensor");
  int64_t chunks = attrs.get_int("chunks");
  KILN_CHECK(chunks > 0, "chunk expects `chunks` to be greater than 0, got: ", chunks);
  int64_t d = wrap(in, attrs.get_int("dim"), "chunk");
  const I size = in.shape[size_t(d)];
  if (size == I(0)) return pieces_along(in, d, Ints<I>(size_t(chunks), I(0)));
  return pieces_along(in, d, pieces_of(size, div_floor(size + (chunks - 1), chunks)));
}

#undef KILN_VIEW_RULE

// Each rule as a class template, so view_op can name it for both integer types.
#define KILN_RULE_CLASS(rule)                                              \
  template <typename I>                                                    \
  struct rule##_t {                                                        \
    static std::vector<Meta<I>> apply(const Meta<I>& in, const Attrs& a) { \
      return rule<I>(in, a);                                               \
    }                                                                      \
  };
KILN_RULE_CLASS(view_rule)
KILN_RULE_CLASS(transpose_rule)
KILN_RULE_CLASS(permute_rule)
KILN_RULE_CLASS(expand_rule)
KILN_RULE_CLASS(squeeze_rule)
KILN_RULE_CLASS(unsqueeze_rule)
KILN_RULE_CLASS(narrow_rule)
KILN_RULE_CLASS(select_rule)
KILN_RULE_CLASS(slice_rule)
KILN_RULE_CLASS(split_rule)
KILN_RULE_CLASS(chunk_rule)
#undef KILN_RULE_CLASS

// ---- slice_scatter, select_scatter ----
// Not views: a copy of base with src written into the part the slice or
// select view of base would show. Views' backward rules need them ("the
// gradient placed into zeros"); as ops of their own they keep their history.
// They reuse the view rules, so the part can never disagree with the view.

template <template <typename> class Rule>
InferResult infer_scatter_into(const InferArgs& args) {
  const TensorMeta &base = args.inputs[0], &src = args.inputs[1];
  DimList part = view_shapes<Rule>(base.shape, args.attrs)[0];
  KILN_CHECK(src.shape == part, args.op.name,
             ": expected src to have a size equal to the slice of self. src size = ", src.shape,
             ", slice size = ", part);
  return InferResult{{TensorMeta{base.dtype, base.shape}}, {base.dtype, base.dtype}};
}

template <template <typename> class Rule>
void scatter_into_kernel(const KernelArgs& args) {
  const cpu::StridedView& out = args.outputs[0];
  cpu::copy_convert(out, args.inputs[0]);
  ViewMeta whole{IntList(out.shape, out.shape + out.ndim),
                 IntList(out.strides, out.strides + out.ndim), 0};
  ViewMeta part = Rule<int64_t>::apply(whole, args.attrs)[0];
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
    g_base = dispatch1(scatter_op, {g, zeros(ctx.input_shape(1), g.dtype())}, ctx.attrs());
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

IntList input_shape(const GradContext& ctx) {
  return ctx.input_shape(0);
}

Tensor zeros_of_input(const GradContext& ctx) {
  return zeros(ctx.input_shape(0), ctx.input_meta(0).dtype);
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

template <template <typename> class Rule>
OpDef view_op(std::string name, std::vector<AttrSpec> attrs, std::string onnx_type, GradFn grad,
              int num_outputs = 1) {
  return OpDef{.name = std::move(name),
               .num_outputs = num_outputs,
               .attrs = std::move(attrs),
               .infer = infer_view<Rule>,
               .view = apply_view<Rule>,
               .grad = grad,
               .kind = OpKind::View,
               .onnx = {std::move(onnx_type)}};
}

}  // namespace

void register_view_ops(OpRegistry& registry) {
  const AttrValue none;
  registry.add(view_op<view_rule_t>("view", {{"shape", AttrKind::Ints, none}}, "Reshape",
                                    reshape_back_grad));
  registry.add(view_op<transpose_rule_t>(
      "transpose", {{"dim0", AttrKind::Int, none}, {"dim1", AttrKind::Int, none}}, "Transpose",
      transpose_grad));
  registry.add(view_op<permute_rule_t>("permute", {{"dims", AttrKind::Ints, none}}, "Transpose",
                                       permute_grad));
  registry.add(
      view_op<expand_rule_t>("expand", {{"size", AttrKind::Ints, none}}, "Expand", expand_grad));
  // dims None: every size-1 dim.
  registry.add(view_op<squeeze_rule_t>("squeeze", {{"dims", AttrKind::Ints, none, true}}, "Squeeze",
                                       reshape_back_grad));
  registry.add(view_op<unsqueeze_rule_t>("unsqueeze", {{"dim", AttrKind::Int, none}}, "Unsqueeze",
                                         reshape_back_grad));
  registry.add(view_op<narrow_rule_t>("narrow",
                                      {{"dim", AttrKind::Int, none},
                                       {"start", AttrKind::Int, none},
                                       {"length", AttrKind::Int, none}},
                                      "Slice", narrow_grad));
  registry.add(view_op<select_rule_t>(
      "select", {{"dim", AttrKind::Int, none}, {"index", AttrKind::Int, none}}, "Gather",
      select_grad));
  registry.add(view_op<slice_rule_t>("slice",
                                     {{"dim", AttrKind::Int, none},
                                      {"start", AttrKind::Int, none, true},
                                      {"end", AttrKind::Int, none, true},
                                      {"step", AttrKind::Int, int64_t(1)}},
                                     "Slice", slice_grad));
  // Exactly one of split_size and sizes is given (torch.split takes either).
  registry.add(view_op<split_rule_t>("split",
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
                     .infer = infer_scatter_into<slice_rule_t>,
                     .cpu = scatter_into_kernel<slice_rule_t>,
                     .grad = scatter_into_grad<kSlice>,
                     .onnx = {""}});
  registry.add(OpDef{.name = "select_scatter",
                     .min_inputs = 2,
                     .max_inputs = 2,
                     .attrs = {{"dim", AttrKind::Int, none}, {"index", AttrKind::Int, none}},
                     .infer = infer_scatter_into<select_rule_t>,
                     .cpu = scatter_into_kernel<select_rule_t>,
                     .grad = scatter_into_grad<kSelect>,
                     .onnx = {""}});
  registry.add(view_op<chunk_rule_t>(
      "chunk", {{"chunks", AttrKind::Int, none}, {"dim", AttrKind::Int, int64_t(0)}}, "Split",
      chunk_grad, -1));
}

}  // namespace kiln
