// Ops that rearrange or pick values into a new tensor: reshape (the copying
// half of the reshape API function), cat, stack, index_select, gather,
// embedding, one_hot, and the accumulating writes index_add and scatter_add
// (the backward ops of index_select/embedding and of gather).
#include "kiln/core/factory.h"
#include "kiln/kernels/cpu/concat.h"
#include "kiln/kernels/cpu/copy.h"
#include "kiln/kernels/cpu/gather.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/registry.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/view.h"

namespace kiln {
namespace {

// A dim attribute in [0, ndim): infer has already checked its range.
int wrapped_dim(const Attrs& attrs, int ndim) {
  int64_t dim = attrs.get_int("dim");
  return int(dim < 0 ? dim + std::max(ndim, 1) : dim);
}

bool is_index_dtype(DType dtype) {
  return dtype == DType::Int64 || dtype == DType::Int32;
}

InferResult infer_reshape_op(const InferArgs& args) {
  const TensorMeta& in = args.inputs[0];
  DimList shape =
      infer_reshape(args.attrs.get_dims("shape"), numel_of(in.shape), "reshape", in.shape);
  return InferResult{{TensorMeta{in.dtype, std::move(shape)}}, {}};
}

// Row-major order is the same in both shapes, so the contiguous output is
// written as if it had the input's shape.
void reshape_kernel(const KernelArgs& args) {
  const cpu::StridedView& in = args.inputs[0];
  cpu::StridedView out = args.outputs[0];
  KILN_ASSERT(out.is_contiguous(), "reshape: output must be contiguous");
  IntList in_shape(in.shape, in.shape + in.ndim);
  IntList strides = contiguous_strides(in_shape);
  out.ndim = in.ndim;
  std::copy(in_shape.begin(), in_shape.end(), out.shape);
  std::copy(strides.begin(), strides.end(), out.strides);
  cpu::copy_convert(out, in);
}

DType promoted_dtype(std::span<const TensorMeta> inputs) {
  DType dtype = inputs[0].dtype;
  for (const TensorMeta& m : inputs)
    dtype = promote_types(dtype, m.dtype);
  return dtype;
}

// PyTorch lets a 1-D empty tensor join a cat of any shape (legacy behaviour
// that old code relies on).
bool skipped_by_cat(const TensorMeta& m) {
  return m.shape.size() == 1 && m.shape[0].is_static() && m.shape[0].static_value() == 0;
}

InferResult infer_cat(const InferArgs& args) {
  std::span<const TensorMeta> inputs = args.inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK(inputs[i].dim() > 0, "cat: zero-dimensional tensor (at position ", i,
               ") cannot be concatenated");
  }
  auto ref_it = std::find_if(inputs.begin(), inputs.end(),
                             [](const TensorMeta& m) { return !skipped_by_cat(m); });
  const TensorMeta& ref = ref_it == inputs.end() ? inputs[0] : *ref_it;
  int64_t d = wrap_dim(args.attrs.get_int("dim"), ref.dim(), "cat", ref.shape);
  DimList shape = ref.shape;
  shape[size_t(d)] = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const DimList& s = inputs[i].shape;
    if (skipped_by_cat(inputs[i]) && &inputs[i] != &ref) continue;
    KILN_CHECK(s.size() == ref.shape.size(),
               "cat: Tensors must have same number of dimensions: got ", ref.dim(), " and ",
               inputs[i].dim(), " (tensor number ", i, " has shape ", s, ", expected a shape like ",
               ref.shape, ")");
    for (size_t k = 0; k < s.size(); ++k) {
      KILN_CHECK(int64_t(k) == d || equal_or_assumed(s[k], ref.shape[k]),
                 "cat: Sizes of tensors must match except in dimension ", d, ". Expected size ",
                 ref.shape[k], " but got size ", s[k], " for tensor number ", i,
                 " in the list (shapes ", ref.shape, " and ", s, ", dim ", k, ")");
    }
    shape[size_t(d)] += s[size_t(d)];
  }
  DType dtype = promoted_dtype(inputs);
  return InferResult{{TensorMeta{dtype, std::move(shape)}},
                     std::vector<DType>(inputs.size(), dtype)};
}

void cat_kernel(const KernelArgs& args) {
  const cpu::StridedView& out = args.outputs[0];
  cpu::concat(out, args.inputs, wrapped_dim(args.attrs, out.ndim));
}

InferResult infer_stack(const InferArgs& args) {
  std::span<const TensorMeta> inputs = args.inputs;
  const DimList& first = inputs[0].shape;
  for (size_t i = 1; i < inputs.size(); ++i) {
    KILN_CHECK(inputs[i].shape == first, "stack expects each tensor to be equal size, but got ",
               first, " at entry 0 and ", inputs[i].shape, " at entry ", i);
  }
  int64_t d = wrap_dim(args.attrs.get_int("dim"), inputs[0].dim() + 1, "stack", first);
  DimList shape = first;
  shape.insert(shape.begin() + d, int64_t(inputs.size()));
  DType dtype = promoted_dtype(inputs);
  return InferResult{{TensorMeta{dtype, std::move(shape)}},
                     std::vector<DType>(inputs.size(), dtype)};
}

void stack_kernel(const KernelArgs& args) {
  const cpu::StridedView& out = args.outputs[0];
  cpu::stack(out, args.inputs, wrapped_dim(args.attrs, out.ndim));
}

void check_index_dtype(const InferArgs& args, const TensorMeta& index) {
  KILN_CHECK_TYPE(is_index_dtype(index.dtype), args.op.name,
                  ": expected an int64 or int32 index tensor, got ", index.dtype, " (shape ",
                  index.shape, ")");
}

InferResult infer_index_select(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  const TensorMeta& index = args.inputs[1];
  check_index_dtype(args, index);
  KILN_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector, got shape ",
                   index.shape);
  int64_t d = wrap_dim(args.attrs.get_int("dim"), x.dim(), "index_select", x.shape);
  Dim count = numel_of(index.shape);
  if (x.dim() == 0) {
    KILN_CHECK_INDEX(count == 1, "index_select(): Index to scalar can have only 1 value, got ",
                     count, " value(s)");
    return InferResult{{TensorMeta{x.dtype, {}}}, {}};
  }
  DimList shape = x.shape;
  shape[size_t(d)] = count;
  return InferResult{{TensorMeta{x.dtype, std::move(shape)}}, {}};
}

void index_select_kernel(const KernelArgs& args) {
  const cpu::StridedView& x = args.inputs[0];
  cpu::index_select(args.outputs[0], x, args.inputs[1], wrapped_dim(args.attrs, x.ndim));
}

InferResult infer_gather(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  const TensorMeta& index = args.inputs[1];
  check_index_dtype(args, index);
  int64_t d = wrap_dim(args.attrs.get_int("dim"), x.dim(), "gather", x.shape);
  // A 0-d tensor counts as 1-D here, as in PyTorch.
  KILN_CHECK(std::max<int64_t>(index.dim(), 1) == std::max<int64_t>(x.dim(), 1),
             "gather: Index tensor must have the same number of dimensions as input tensor (index "
             "shape ",
             index.shape, ", input shape ", x.shape, ")");
  for (int64_t k = 0; k < index.dim() && x.dim() > 0; ++k) {
    KILN_CHECK(k == d || index.shape[size_t(k)] <= x.shape[size_t(k)],
               "gather: Size does not match at dimension ", k, " expected index ", index.shape,
               " to be smaller than self ", x.shape, " apart from dimension ", d);
  }
  return InferResult{{TensorMeta{x.dtype, index.shape}}, {}};
}

void gather_kernel(const KernelArgs& args) {
  const cpu::StridedView& x = args.inputs[0];
  cpu::gather(args.outputs[0], x, args.inputs[1], wrapped_dim(args.attrs, x.ndim));
}

InferResult infer_embedding(const InferArgs& args) {
  const TensorMeta& weight = args.inputs[0];
  const TensorMeta& indices = args.inputs[1];
  KILN_CHECK(weight.dim() == 2, "embedding: 'weight' must be 2-D, got shape ", weight.shape);
  check_index_dtype(args, indices);
  if (args.attrs.has("padding_idx")) {
    // A range check, not a decision: a symbolic number of rows passes unless
    // no size could hold the index, and each call's plan checks its own.
    const Dim& rows = weight.shape[0];
    const Dim padding_idx = args.attrs.get_int("padding_idx");
    KILN_CHECK(!definitely_less(padding_idx, -rows) && !definitely_less(rows, padding_idx + 1),
               "embedding: Padding_idx ", padding_idx, " must be within num_embeddings (", rows,
               ", weight shape ", weight.shape, ")");
  }
  DimList shape = indices.shape;
  shape.push_back(weight.shape[1]);
  return InferResult{{TensorMeta{weight.dtype, std::move(shape)}}, {}};
}

void embedding_kernel(const KernelArgs& args) {
  cpu::embedding(args.outputs[0], args.inputs[0], args.inputs[1]);
}

InferResult infer_one_hot(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  KILN_CHECK(x.dtype == DType::Int64,
             "one_hot is only applicable to index tensor of type LongTensor, got ", x.dtype);
  int64_t num_classes = args.attrs.get_int("num_classes");
  KILN_CHECK(num_classes > 0, "one_hot: num_classes must be positive, got ", num_classes);
  DimList shape = x.shape;
  shape.push_back(num_classes);
  return InferResult{{TensorMeta{DType::Int64, std::move(shape)}}, {}};
}

void one_hot_kernel(const KernelArgs& args) {
  cpu::one_hot(args.outputs[0], args.inputs[0], args.attrs.get_int("num_classes"));
}

// A 0-d tensor counts as 1-D of size 1 for scatter_add and index_add, as in PyTorch.
DimList as_at_least_1d(const DimList& shape) {
  return shape.empty() ? DimList{1} : shape;
}

InferResult infer_scatter_add(const InferArgs& args) {
  const TensorMeta &self = args.inputs[0], &index = args.inputs[1], &src = args.inputs[2];
  check_index_dtype(args, index);
  int64_t d = wrap_dim(args.attrs.get_int("dim"), self.dim(), "scatter_add", self.shape);
  const DimList s = as_at_least_1d(self.shape), i = as_at_least_1d(index.shape),
                x = as_at_least_1d(src.shape);
  KILN_CHECK(i.size() == s.size() && x.size() == s.size(),
             "scatter_add: Index tensor must have the same number of dimensions as self tensor "
             "and src tensor (index shape ",
             index.shape, ", self shape ", self.shape, ", src shape ", src.shape, ")");
  for (size_t k = 0; k < i.size() && !definitely_less(numel_of(index.shape), 1); ++k) {
    KILN_CHECK((int64_t(k) == d || !definitely_less(s[k], i[k])) && !definitely_less(x[k], i[k]),
               "scatter_add: Expected index ", index.shape, " to be smaller than self ", self.shape,
               " apart from dimension ", d, " and to be smaller size than src ", src.shape);
  }
  return InferResult{{TensorMeta{self.dtype, self.shape}}, {self.dtype, index.dtype, self.dtype}};
}

void scatter_add_kernel(const KernelArgs& args) {
  const cpu::StridedView& out = args.outputs[0];
  cpu::scatter_add(out, args.inputs[0], args.inputs[1], args.inputs[2],
                   wrapped_dim(args.attrs, out.ndim));
}

InferResult infer_index_add(const InferArgs& args) {
  const TensorMeta &self = args.inputs[0], &index = args.inputs[1], &src = args.inputs[2];
  check_index_dtype(args, index);
  KILN_CHECK_INDEX(index.dim() <= 1, "index_add(): Index is supposed to be a vector, got shape ",
                   index.shape);
  int64_t d = wrap_dim(args.attrs.get_int("dim"), self.dim(), "index_add", self.shape);
  const DimList s = as_at_least_1d(self.shape), x = as_at_least_1d(src.shape);
  KILN_CHECK(self.dim() == src.dim(),
             "index_add(): Self and source should have same number of dimensions (self shape ",
             self.shape, ", source shape ", src.shape, ")");
  const Dim count = numel_of(index.shape);
  KILN_CHECK(x[size_t(d)] == count, "index_add(): Number of indices (", count,
             ") should be equal to source.size(dim) (", x[size_t(d)], "), dim ", d);
  for (size_t k = 0; k < s.size(); ++k) {
    KILN_CHECK(int64_t(k) == d || s[k] == x[k], "index_add(): source shape ", src.shape,
               " must match self shape ", self.shape, " except at dim ", d);
  }
  return InferResult{{TensorMeta{self.dtype, self.shape}}, {self.dtype, index.dtype, self.dtype}};
}

void index_add_kernel(const KernelArgs& args) {
  const cpu::StridedView& out = args.outputs[0];
  cpu::index_add(out, args.inputs[0], args.inputs[1], args.inputs[2],
                 wrapped_dim(args.attrs, out.ndim));
}

// ---- backward rules ----

Tensor zeros_of_input(const GradContext& ctx, size_t i) {
  return zeros(ctx.input_shape(i), ctx.input_meta(i).dtype);
}

int64_t grad_dim(const GradContext& ctx, int64_t ndim) {
  int64_t dim = ctx.attrs().get_int("dim");
  return dim < 0 ? dim + std::max<int64_t>(ndim, 1) : dim;
}

// The copying reshape keeps row-major order: reshape the gradient back.
std::vector<Tensor> reshape_grad(const GradContext& ctx) {
  return {reshape(ctx.grad_output(0), ctx.input_shape(0))};
}

// Each input owns a stretch of the output along dim; its gradient is that
// stretch. Skipped 1-D empty inputs (see skipped_by_cat) get an empty one.
std::vector<Tensor> cat_grad(const GradContext& ctx) {
  const Tensor& g = ctx.grad_output(0);
  const size_t n = ctx.num_inputs();
  size_t ref = 0;
  while (ref < n && skipped_by_cat(ctx.input_meta(ref)))
    ++ref;
  if (ref == n) ref = 0;
  const int64_t d = grad_dim(ctx, ctx.input_meta(ref).dim());
  std::vector<Tensor> grads(n);
  int64_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    const TensorMeta& m = ctx.input_meta(i);
    if (skipped_by_cat(m) && i != ref) {
      if (ctx.needs_input_grad(i)) grads[i] = zeros_of_input(ctx, i);
      continue;
    }
    const int64_t size = ctx.input_shape(i)[size_t(d)];
    if (ctx.needs_input_grad(i)) grads[i] = narrow(g, d, offset, size);
    offset += size;
  }
  return grads;
}

// Input i is the output at index i along the new dim.
std::vector<Tensor> stack_grad(const GradContext& ctx) {
  const int64_t d = grad_dim(ctx, ctx.input_meta(0).dim() + 1);
  std::vector<Tensor> grads(ctx.num_inputs());
  for (size_t i = 0; i < grads.size(); ++i) {
    if (ctx.needs_input_grad(i)) grads[i] = select(ctx.grad_output(0), d, int64_t(i));
  }
  return grads;
}

// out.select(dim, i) = x.select(dim, index[i]): each output slice's gradient
// is added into the slice it came from (repeated indices add up).
std::vector<Tensor> index_select_grad(const GradContext& ctx) {
  if (!ctx.needs_input_grad(0)) return {Tensor(), Tensor()};
  const Tensor& g = ctx.grad_output(0);
  if (ctx.input_meta(0).dim() == 0) return {g, Tensor()};  // one index, the element itself
  const int64_t d = grad_dim(ctx, ctx.input_meta(0).dim());
  return {index_add(zeros_of_input(ctx, 0), d, ctx.input(1), g), Tensor()};
}

// out[i][j] = x[index[i][j]][j]: the gradient is scattered back, adding up.
std::vector<Tensor> gather_grad(const GradContext& ctx) {
  if (!ctx.needs_input_grad(0)) return {Tensor(), Tensor()};
  const int64_t d = grad_dim(ctx, ctx.input_meta(0).dim());
  return {scatter_add(zeros_of_input(ctx, 0), d, ctx.input(1), ctx.grad_output(0)), Tensor()};
}

// out[..., :] = weight[indices[...], :]: each row's gradient is the sum of
// the output rows that read it (PyTorch's embedding_backward); the
// padding_idx row gets none.
std::vector<Tensor> embedding_grad(const GradContext& ctx) {
  if (!ctx.needs_input_grad(0)) return {Tensor(), Tensor()};
  const IntList& w = ctx.input_shape(0);
  const Tensor indices = ctx.input(1);
  const int64_t n = indices.numel();
  Tensor gw = index_add(zeros_of_input(ctx, 0), 0, reshape(indices, {n}),
                        reshape(ctx.grad_output(0), {n, w[1]}));
  if (ctx.attrs().has("padding_idx")) {
    int64_t pad = ctx.attrs().get_int("padding_idx");
    if (pad < 0) pad += w[0];
    gw = select_scatter(gw, zeros({w[1]}, gw.dtype()), 0, pad);
  }
  return {gw, Tensor()};
}

// out = self + (src scattered by index): self's gradient passes through;
// src[i][j] landed at out[index[i][j]][j], so its gradient is gathered from
// there. Where index is smaller than src, the src entries it never reads get zero.
std::vector<Tensor> scatter_add_grad(const GradContext& ctx) {
  const Tensor& g = ctx.grad_output(0);
  Tensor g_self = ctx.needs_input_grad(0) ? g : Tensor();
  if (!ctx.needs_input_grad(2)) return {g_self, Tensor(), Tensor()};
  const int64_t d = grad_dim(ctx, ctx.input_meta(0).dim());
  Tensor g_src = gather(g, d, ctx.input(1));
  const IntList& want = ctx.input_shape(2);
  IntList shape = g_src.shape();
  for (size_t k = 0; k < want.size(); ++k) {
    if (shape[k] == want[k]) continue;
    const int64_t read = shape[k];
    shape[k] = want[k];
    g_src = slice_scatter(zeros(shape, g.dtype()), g_src, int64_t(k), 0, read);
  }
  return {g_self, Tensor(), g_src};
}

// out = self + (src added at index along dim): self's gradient passes
// through; src's slice i went to index[i], so it reads the gradient there.
std::vector<Tensor> index_add_grad(const GradContext& ctx) {
  const Tensor& g = ctx.grad_output(0);
  Tensor g_self = ctx.needs_input_grad(0) ? g : Tensor();
  if (!ctx.needs_input_grad(2)) return {g_self, Tensor(), Tensor()};
  const int64_t d = grad_dim(ctx, ctx.input_meta(0).dim());
  return {g_self, Tensor(), index_select(g, d, ctx.input(1))};
}

}  // namespace

void register_shape_ops(OpRegistry& registry) {
  const AttrValue none;
  // Always a copy; the reshape API function uses the `view` op instead when
  // the input's strides allow it.
  registry.add(OpDef{.name = "reshape",
                     .attrs = {{"shape", AttrKind::Ints, none}},
                     .infer = infer_reshape_op,
                     .cpu = reshape_kernel,
                     .grad = reshape_grad,
                     .onnx = {"Reshape"}});
  registry.add(OpDef{.name = "cat",
                     .max_inputs = -1,
                     .attrs = {{"dim", AttrKind::Int, int64_t(0)}},
                     .infer = infer_cat,
                     .cpu = cat_kernel,
                     .grad = cat_grad,
                     .onnx = {"Concat"}});
  // ONNX has no Stack: the exporter writes Unsqueeze + Concat.
  registry.add(OpDef{.name = "stack",
                     .max_inputs = -1,
                     .attrs = {{"dim", AttrKind::Int, int64_t(0)}},
                     .infer = infer_stack,
                     .cpu = stack_kernel,
                     .grad = stack_grad,
                     .onnx = {""}});
  registry.add(OpDef{.name = "index_select",
                     .min_inputs = 2,
                     .max_inputs = 2,
                     .attrs = {{"dim", AttrKind::Int, none}},
                     .infer = infer_index_select,
                     .cpu = index_select_kernel,
                     .grad = index_select_grad,
                     .onnx = {"Gather"}});
  registry.add(OpDef{.name = "gather",
                     .min_inputs = 2,
                     .max_inputs = 2,
                     .attrs = {{"dim", AttrKind::Int, none}},
                     .infer = infer_gather,
                     .cpu = gather_kernel,
                     .grad = gather_grad,
                     .onnx = {"GatherElements"}});
  // Inputs: weight, indices. padding_idx only matters to the backward rule.
  registry.add(OpDef{.name = "embedding",
                     .min_inputs = 2,
                     .max_inputs = 2,
                     .attrs = {{"padding_idx", AttrKind::Int, none, true}},
                     .infer = infer_embedding,
                     .cpu = embedding_kernel,
                     .grad = embedding_grad,
                     .onnx = {"Gather"}});
  // scatter_add(self, index, src; dim) and index_add(self, index, src; dim):
  // src is cast to self's dtype.
  registry.add(OpDef{.name = "scatter_add",
                     .min_inputs = 3,
                     .max_inputs = 3,
                     .attrs = {{"dim", AttrKind::Int, none}},
                     .infer = infer_scatter_add,
                     .cpu = scatter_add_kernel,
                     .grad = scatter_add_grad,
                     .onnx = {"ScatterElements"}});
  registry.add(OpDef{.name = "index_add",
                     .min_inputs = 3,
                     .max_inputs = 3,
                     .attrs = {{"dim", AttrKind::Int, none}},
                     .infer = infer_index_add,
                     .cpu = index_add_kernel,
                     .grad = index_add_grad,
                     .onnx = {""}});
  // Integer output: no gradient.
  registry.add(OpDef{.name = "one_hot",
                     .attrs = {{"num_classes", AttrKind::Int, none}},
                     .infer = infer_one_hot,
                     .cpu = one_hot_kernel,
                     .onnx = {"OneHot"}});
}

}  // namespace kiln

namespace kiln {

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  KILN_CHECK_VALUE(!tensors.empty(), "cat(): expected a non-empty list of Tensors");
  static const OpDef& cat_op = op("cat");
  return dispatch1(cat_op, tensors, {{"dim", dim}});
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  KILN_CHECK_VALUE(!tensors.empty(), "stack expects a non-empty TensorList");
  static const OpDef& stack_op = op("stack");
  return dispatch1(stack_op, tensors, {{"dim", dim}});
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  static const OpDef& index_select_op = op("index_select");
  return dispatch1(index_select_op, {x, index}, {{"dim", dim}});
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  static const OpDef& gather_op = op("gather");
  return dispatch1(gather_op, {x, index}, {{"dim", dim}});
}

Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx) {
  static const OpDef& embedding_op = op("embedding");
  AttrValue padding = padding_idx ? AttrValue(*padding_idx) : AttrValue();
  return dispatch1(embedding_op, {weight, indices}, {{"padding_idx", padding}});
}

Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  static const OpDef& scatter_add_op = op("scatter_add");
  return dispatch1(scatter_add_op, {self, index, src}, {{"dim", dim}});
}

Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source) {
  static const OpDef& index_add_op = op("index_add");
  return dispatch1(index_add_op, {self, index, source}, {{"dim", dim}});
}

// num_classes = -1 reads the values (as PyTorch does), so a trace sees the
// class count as a constant.
Tensor one_hot(const Tensor& x, int64_t num_classes) {
  static const OpDef& one_hot_op = op("one_hot");
  if (num_classes == -1) {
    KILN_CHECK(x.dtype() == DType::Int64,
               "one_hot is only applicable to index tensor of type LongTensor, got ", x.dtype());
    KILN_CHECK(x.numel() > 0, "one_hot: Can not infer total number of classes from empty tensor.");
    int64_t largest = cpu::max_int64(view_of(x));
    KILN_CHECK(largest >= 0, "one_hot: Class values must be non-negative, got ", largest);
    num_classes = largest + 1;
  }
  return dispatch1(one_hot_op, {x}, {{"num_classes", num_classes}});
}

}  // namespace kiln
