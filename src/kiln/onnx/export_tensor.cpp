// ONNX translations of the view, shape, indexing and linear-algebra ops.
// With a dynamic batch, reshape targets copy the batch from their input
// (ExportContext::reshape_target). Symbolic sizes in attributes and shapes
// (a view to [batch, seq, 2, 8], a slice end seq // 2) are computed in the
// graph (export_sizes.cpp), or written as Reshape's 0 and Expand's 1 where
// the input already has the size.
#include <algorithm>

#include "kiln/core/factory.h"
#include "kiln/onnx/export_context.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using jit::Node;
using Table = std::unordered_map<std::string, ExportFn>;

int64_t rank_of(const jit::Value* value) {
  return int64_t(value->shape().size());
}

int64_t wrap(int64_t dim, int64_t rank) {
  return dim < 0 ? dim + rank : dim;
}

// A literal 0 in a Reshape target means "copy the input's dimension"
// unless allowzero is set (opset 14 on); a dynamic batch uses that meaning,
// and so does a symbolic dim that the input has at the same place.
void reshape(const Node& node, ExportContext& c) {
  const DimList& shape = node.output()->shape();
  bool empty_dims = std::any_of(shape.begin(), shape.end(), [](const Dim& d) {
    return d.is_static() && d.static_value() == 0;
  });
  bool literal_zeros = empty_dims && c.opset() >= 14;
  std::string target;
  if (is_static(shape)) {
    target = c.ints(c.reshape_target(to_static(shape), node.input(0)));
  } else {
    DimList dims = shape;
    const DimList& in = node.input(0)->shape();
    for (size_t i = 0; i < dims.size() && i < in.size() && !literal_zeros; ++i)
      if (dims[i].is_symbolic() && dims[i].same_as(in[i])) dims[i] = 0;
    target = c.sizes(dims);
  }
  auto& made = c.node_for(node.output(), "Reshape", {c.name(node.input(0)), target});
  if (literal_zeros) set_attr(made, "allowzero", int64_t(1));
}

void transpose(const Node& node, ExportContext& c) {
  int64_t rank = rank_of(node.input(0));
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < rank; ++i)
    perm.push_back(i);
  if (rank > 0) {
    std::swap(perm[size_t(wrap(node.attrs().get_int("dim0"), rank))],
              perm[size_t(wrap(node.attrs().get_int("dim1"), rank))]);
  }
  auto& made = c.node_for(node.output(), "Transpose", {c.name(node.input(0))});
  set_attr(made, "perm", perm);
}

void permute(const Node& node, ExportContext& c) {
  int64_t rank = rank_of(node.input(0));
  std::vector<int64_t> perm;
  for (int64_t dim : node.attrs().get_ints("dims"))
    perm.push_back(wrap(dim, rank));
  auto& made = c.node_for(node.output(), "Transpose", {c.name(node.input(0))});
  set_attr(made, "perm", perm);
}

// Expand broadcasts: a 1 in the target keeps the input's size there.
void expand(const Node& node, ExportContext& c) {
  const DimList& out = node.output()->shape();
  if (is_static(out)) {
    std::vector<int64_t> shape = to_static(out);
    if (c.dynamic_batch() && !shape.empty() && shape[0] == c.batch()) shape[0] = 1;
    c.node_for(node.output(), "Expand", {c.name(node.input(0)), c.ints(shape)});
    return;
  }
  DimList target = out;
  const DimList& in = node.input(0)->shape();
  size_t offset = out.size() - in.size();
  for (size_t i = offset; i < out.size(); ++i)
    if (target[i].is_symbolic() && target[i].same_as(in[i - offset])) target[i] = 1;
  c.node_for(node.output(), "Expand", {c.name(node.input(0)), c.sizes(target)});
}

// squeeze/unsqueeze, select, narrow and slice as Reshape/Slice/Gather.
void squeeze(const Node& node, ExportContext& c) {
  reshape(node, c);
}
void unsqueeze(const Node& node, ExportContext& c) {
  int64_t dim = wrap(node.attrs().get_int("dim"), rank_of(node.input(0)) + 1);
  c.node_for(node.output(), "Unsqueeze", {c.name(node.input(0)), c.ints({dim})});
}

// Slice bounds are 1-D tensors, computed in the graph when symbolic; ONNX
// clamps them as Python does.
void slice_of(const Node& node, ExportContext& c, int64_t dim, const Dim& start, const Dim& end,
              int64_t step) {
  c.node_for(node.output(), "Slice",
             {c.name(node.input(0)), c.size(start), c.size(end), c.ints({dim}), c.ints({step})});
}

void narrow(const Node& node, ExportContext& c) {
  int64_t rank = rank_of(node.input(0));
  int64_t dim = wrap(node.attrs().get_int("dim"), rank);
  Dim start = node.attrs().get_dim("start");
  if (start.is_static() && start.static_value() < 0) start += node.input(0)->shape()[size_t(dim)];
  slice_of(node, c, dim, start, start + node.attrs().get_dim("length"), 1);
}

void slice(const Node& node, ExportContext& c) {
  int64_t rank = rank_of(node.input(0));
  int64_t dim = wrap(node.attrs().get_int("dim"), rank);
  auto bound = [&](const char* name, int64_t absent) {
    return node.attrs().has(name) ? node.attrs().get_dim(name) : Dim(absent);
  };
  slice_of(node, c, dim, bound("start", 0), bound("end", INT64_MAX), node.attrs().get_int("step"));
}

// Gather with a 0-d index drops the dim (and takes a negative index as
// Python does, which a symbolic input size needs).
void select(const Node& node, ExportContext& c) {
  int64_t rank = rank_of(node.input(0));
  int64_t dim = wrap(node.attrs().get_int("dim"), rank);
  Dim index = node.attrs().get_dim("index");
  const Dim& size = node.input(0)->shape()[size_t(dim)];
  if (index.is_static() && index.static_value() < 0 && size.is_static()) index += size;
  std::string scalar_index = index.is_static()
                                 ? c.initializer(full({}, index.static_value(), DType::Int64))
                                 : c.temp("Reshape", {c.size(index), c.ints({})});
  auto& made = c.node_for(node.output(), "Gather", {c.name(node.input(0)), scalar_index});
  set_attr(made, "axis", dim);
}

// split and chunk: one Split with the sizes of the outputs.
void split(const Node& node, ExportContext& c) {
  int64_t rank = rank_of(node.input(0));
  int64_t dim = wrap(node.attrs().get_int("dim"), rank);
  DimList sizes;
  std::vector<std::string> outputs;
  for (const jit::Value* output : node.outputs()) {
    sizes.push_back(output->shape()[size_t(dim)]);
    std::string name = c.fresh(str("v", output->id()));
    c.bind(output, name);
    outputs.push_back(name);
  }
  auto& made = c.node("Split", {c.name(node.input(0)), c.sizes(sizes)}, outputs);
  set_attr(made, "axis", dim);
}

// cat skips 1-D empty inputs whatever the rank of the others (PyTorch's
// legacy rule); Concat would refuse them.
void cat(const Node& node, ExportContext& c) {
  std::vector<std::string> inputs;
  for (const jit::Value* input : node.inputs()) {
    bool legacy_empty = same_dims(input->shape(), DimList{0}) && rank_of(node.output()) > 1;
    if (!legacy_empty) inputs.push_back(c.as_dtype(input, node.output()->dtype()));
  }
  auto& made = c.node_for(node.output(), "Concat", inputs);
  set_attr(made, "axis", wrap(node.attrs().get_int("dim"), rank_of(node.output())));
}

void stack(const Node& node, ExportContext& c) {
  int64_t dim = wrap(node.attrs().get_int("dim"), rank_of(node.output()));
  std::vector<std::string> inputs;
  for (const jit::Value* input : node.inputs())
    inputs.push_back(
        c.temp("Unsqueeze", {c.as_dtype(input, node.output()->dtype()), c.ints({dim})}));
  auto& made = c.node_for(node.output(), "Concat", inputs);
  set_attr(made, "axis", dim);
}

// ONNX's Gather and OneHot index tensors of rank 1 or more.
void need_rank(const Node& node, const jit::Value* value, const char* what) {
  KILN_CHECK(!value->shape().empty(), "onnx export: ", node.op().name, " with a 0-d ", what,
             " (ONNX needs rank 1 or more)");
}

void index_select(const Node& node, ExportContext& c) {
  need_rank(node, node.input(0), "input");
  int64_t dim = wrap(node.attrs().get_int("dim"), rank_of(node.input(0)));
  auto& made = c.node_for(node.output(), "Gather", {c.name(node.input(0)), c.name(node.input(1))});
  set_attr(made, "axis", dim);
}

void gather(const Node& node, ExportContext& c) {
  need_rank(node, node.input(0), "input");
  int64_t dim = wrap(node.attrs().get_int("dim"), rank_of(node.input(0)));
  auto& made =
      c.node_for(node.output(), "GatherElements", {c.name(node.input(0)), c.name(node.input(1))});
  set_attr(made, "axis", dim);
}

void embedding(const Node& node, ExportContext& c) {
  auto& made = c.node_for(node.output(), "Gather", {c.name(node.input(0)), c.name(node.input(1))});
  set_attr(made, "axis", int64_t(0));
}

// scatter_add reads only the part of src the index covers; ScatterElements
// wants updates of the index's shape, so src is sliced to it.
void scatter_add(const Node& node, ExportContext& c) {
  KILN_CHECK(c.opset() >= 16,
             "onnx export: scatter_add needs opset 16 or later (ScatterElements "
             "with reduction=\"add\"), exporting at ",
             c.opset());
  KILN_CHECK(!node.input(0)->shape().empty(), "onnx export: scatter_add into a 0-d tensor");
  int64_t dim = wrap(node.attrs().get_int("dim"), rank_of(node.input(0)));
  const DimList& index_shape = node.input(1)->shape();
  std::string src = c.name(node.input(2));
  if (!same_dims(node.input(2)->shape(), index_shape)) {
    std::vector<int64_t> zeros(index_shape.size(), 0), axes;
    for (size_t i = 0; i < index_shape.size(); ++i)
      axes.push_back(int64_t(i));
    src = c.temp("Slice", {src, c.ints(zeros), c.sizes(index_shape), c.ints(axes)});
  }
  auto& made = c.node_for(node.output(), "ScatterElements",
                          {c.name(node.input(0)), c.name(node.input(1)), src});
  set_attr(made, "axis", dim);
  set_attr(made, "reduction", std::string("add"));
}

// scatter(self, index, src or a number; reduce): ScatterElements, src cut
// to the index's shape (a number broadcast to it). Repeated indices: the
// last write wins, as in kiln's loop.
void scatter(const Node& node, ExportContext& c) {
  const std::string& reduce = node.attrs().get_string("reduce");
  KILN_CHECK(reduce == "none" || c.opset() >= 16, "onnx export: scatter with reduce=", reduce,
             " needs opset 16 or later (ScatterElements with a reduction), exporting at ",
             c.opset());
  need_rank(node, node.input(0), "input");
  int64_t dim = wrap(node.attrs().get_int("dim"), rank_of(node.input(0)));
  DType dtype = node.output()->dtype();
  const DimList& index_shape = node.input(1)->shape();
  std::string index = c.name(node.input(1));
  std::string src = c.as_dtype(node.input(2), dtype);
  if (node.input(2)->shape().empty()) {
    src = c.temp("Expand", {src, c.temp("Shape", {index})});
  } else if (!same_dims(node.input(2)->shape(), index_shape)) {
    std::vector<int64_t> zeros(index_shape.size(), 0), axes;
    for (size_t i = 0; i < index_shape.size(); ++i)
      axes.push_back(int64_t(i));
    src = c.temp("Slice", {src, c.ints(zeros), c.sizes(index_shape), c.ints(axes)});
  }
  auto& made = c.node_for(node.output(), "ScatterElements", {c.name(node.input(0)), index, src});
  set_attr(made, "axis", dim);
  if (reduce != "none") set_attr(made, "reduction", std::string(reduce == "add" ? "add" : "mul"));
}

// ScatterElements wants an index per element of the update: positions
// along `dim` given as [1, .., k, .., 1], broadcast to the update's shape.
std::string positions_along(const std::string& positions, int64_t dim, const jit::Value* update,
                            ExportContext& c) {
  std::vector<int64_t> shape(update->shape().size(), 1);
  shape[size_t(dim)] = -1;
  std::string spread = c.temp("Reshape", {positions, c.ints(shape)});
  return c.temp("Expand", {spread, c.temp("Shape", {c.name(update)})});
}

std::string range_positions(int64_t start, int64_t count, int64_t step, ExportContext& c) {
  std::vector<int64_t> positions;
  for (int64_t i = 0; i < count; ++i)
    positions.push_back(start + i * step);
  return c.ints(positions);
}

// index_add(self, index, src): ScatterElements adding src's slices at the
// indexed positions (repeated indices add up).
void index_add(const Node& node, ExportContext& c) {
  KILN_CHECK(c.opset() >= 16,
             "onnx export: index_add needs opset 16 or later (ScatterElements "
             "with reduction=\"add\"), exporting at ",
             c.opset());
  need_rank(node, node.input(0), "input");
  int64_t dim = wrap(node.attrs().get_int("dim"), rank_of(node.input(0)));
  std::string index = c.as_dtype(node.input(1), DType::Int64);
  std::string indices = positions_along(index, dim, node.input(2), c);
  auto& made = c.node_for(node.output(), "ScatterElements",
                          {c.name(node.input(0)), indices, c.name(node.input(2))});
  set_attr(made, "axis", dim);
  set_attr(made, "reduction", std::string("add"));
}

// slice_scatter(x, src): src written over x's slice start:end:step of dim,
// whose positions are known at export.
void slice_scatter(const Node& node, ExportContext& c) {
  need_rank(node, node.input(0), "input");
  int64_t dim = wrap(node.attrs().get_int("dim"), rank_of(node.input(0)));
  int64_t size = static_shape(node, node.input(0))[size_t(dim)];
  auto bound = [&](const char* name, int64_t absent) {
    if (!node.attrs().has(name)) return absent;
    int64_t value = node.attrs().get_int(name);
    return std::clamp<int64_t>(value < 0 ? value + size : value, 0, size);
  };
  int64_t count = static_shape(node, node.input(1))[size_t(dim)];
  std::string positions =
      range_positions(bound("start", 0), count, node.attrs().get_int("step"), c);
  auto& made = c.node_for(node.output(), "ScatterElements",
                          {c.name(node.input(0)), positions_along(positions, dim, node.input(1), c),
                           c.name(node.input(1))});
  set_attr(made, "axis", dim);
}

// select_scatter(x, src): src (x without dim) written at one index of dim.
void select_scatter(const Node& node, ExportContext& c) {
  need_rank(node, node.input(0), "input");
  int64_t dim = wrap(node.attrs().get_int("dim"), rank_of(node.input(0)));
  int64_t index = node.attrs().get_int("index");
  if (index < 0) index += static_shape(node, node.input(0))[size_t(dim)];
  std::string src = c.temp("Unsqueeze", {c.name(node.input(1)), c.ints({dim})});
  std::vector<int64_t> shape(size_t(rank_of(node.input(0))), 1);
  Tensor at = full(shape, index, DType::Int64);
  std::string indices = c.temp("Expand", {c.initializer(at), c.temp("Shape", {src})});
  auto& made = c.node_for(node.output(), "ScatterElements", {c.name(node.input(0)), indices, src});
  set_attr(made, "axis", dim);
}

void one_hot(const Node& node, ExportContext& c) {
  need_rank(node, node.input(0), "input");
  const Dim& classes = node.output()->shape().back();
  Tensor values = empty({2}, DType::Int64);
  values.data<int64_t>()[0] = 0;
  values.data<int64_t>()[1] = 1;
  auto& made = c.node_for(node.output(), "OneHot",
                          {c.name(node.input(0)), c.size(classes), c.initializer(values)});
  set_attr(made, "axis", int64_t(-1));
}

// linear(x, W, b) = x W^T + b: Gemm for a 2-D x, else MatMul and Add.
void linear(const Node& node, ExportContext& c) {
  std::string x = c.name(node.input(0)), weight = c.name(node.input(1));
  std::string bias = node.inputs().size() > 2 ? c.name(node.input(2)) : "";
  if (rank_of(node.input(0)) == 2) {
    std::vector<std::string> inputs = {x, weight};
    if (!bias.empty()) inputs.push_back(bias);
    auto& made = c.node_for(node.output(), "Gemm", inputs);
    set_attr(made, "transB", int64_t(1));
    return;
  }
  pb::NodeProto* transposed = nullptr;
  std::string weight_t = c.temp("Transpose", {weight}, &transposed);
  set_attr(*transposed, "perm", std::vector<int64_t>{1, 0});
  if (bias.empty()) {
    c.node_for(node.output(), "MatMul", {x, weight_t});
    return;
  }
  c.node_for(node.output(), "Add", {c.temp("MatMul", {x, weight_t}), bias});
}

void addmm(const Node& node, ExportContext& c) {
  auto& made = c.node_for(node.output(), "Gemm",
                          {c.name(node.input(1)), c.name(node.input(2)), c.name(node.input(0))});
  set_attr(made, "alpha", float(node.attrs().get_float("alpha")));
  set_attr(made, "beta", float(node.attrs().get_float("beta")));
}

}  // namespace

bool exports_symbolic_attrs(const std::string& op_name) {
  static const char* const kOps[] = {"view",  "reshape", "expand",  "narrow", "slice", "select",
                                     "split", "chunk",   "uniform", "normal", "scan"};
  return std::find(std::begin(kOps), std::end(kOps), op_name) != std::end(kOps);
}

void add_tensor_exporters(Table& table) {
  table["view"] = reshape;
  table["reshape"] = reshape;
  table["transpose"] = transpose;
  table["permute"] = permute;
  table["expand"] = expand;
  table["squeeze"] = squeeze;
  table["unsqueeze"] = unsqueeze;
  table["narrow"] = narrow;
  table["slice"] = slice;
  table["select"] = select;
  table["split"] = split;
  table["chunk"] = split;
  table["cat"] = cat;
  table["stack"] = stack;
  table["index_select"] = index_select;
  table["gather"] = gather;
  table["embedding"] = embedding;
  table["scatter_add"] = scatter_add;
  table["scatter"] = scatter;
  table["index_add"] = index_add;
  table["slice_scatter"] = slice_scatter;
  table["select_scatter"] = select_scatter;
  table["one_hot"] = one_hot;
  table["linear"] = linear;
  table["addmm"] = addmm;
}

}  // namespace kiln::onnx
