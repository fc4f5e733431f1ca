// ONNX translations of the view, shape, indexing and linear-algebra ops.
// Shapes in kiln attributes are static; with a dynamic batch, reshape
// targets copy the batch from their input (ExportContext::reshape_target).
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
// unless allowzero is set (opset 14 on); a dynamic batch uses that meaning.
void reshape(const Node& node, ExportContext& c) {
  IntList shape = static_shape(node.output());
  std::vector<int64_t> target = c.reshape_target(shape, node.input(0));
  auto& made = c.node_for(node.output(), "Reshape", {c.name(node.input(0)), c.ints(target)});
  bool empty_dims = std::find(shape.begin(), shape.end(), 0) != shape.end();
  if (empty_dims && c.opset() >= 14) set_attr(made, "allowzero", int64_t(1));
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

void expand(const Node& node, ExportContext& c) {
  std::vector<int64_t> shape = static_shape(node.output());
  if (c.dynamic_batch() && !shape.empty() && shape[0] == c.batch()) shape[0] = 1;  // broadcasts
  c.node_for(node.output(), "Expand", {c.name(node.input(0)), c.ints(shape)});
}

// squeeze/unsqueeze, select, narrow and slice as Reshape/Slice/Gather.
void squeeze(const Node& node, ExportContext& c) {
  reshape(node, c);
}
void unsqueeze(const Node& node, ExportContext& c) {
  int64_t dim = wrap(node.attrs().get_int("dim"), rank_of(node.input(0)) + 1);
  c.node_for(node.output(), "Unsqueeze", {c.name(node.input(0)), c.ints({dim})});
}

void slice_of(const Node& node, ExportContext& c, int64_t dim, int64_t start, int64_t end,
              int64_t step) {
  c.node_for(
      node.output(), "Slice",
      {c.name(node.input(0)), c.ints({start}), c.ints({end}), c.ints({dim}), c.ints({step})});
}

void narrow(const Node& node, ExportContext& c) {
  int64_t rank = rank_of(node.input(0));
  int64_t dim = wrap(node.attrs().get_int("dim"), rank);
  int64_t start = node.attrs().get_int("start");
  if (start < 0) start += static_shape(node.input(0))[size_t(dim)];
  slice_of(node, c, dim, start, start + node.attrs().get_int("length"), 1);
}

void slice(const Node& node, ExportContext& c) {
  int64_t rank = rank_of(node.input(0));
  int64_t dim = wrap(node.attrs().get_int("dim"), rank);
  auto optional = [&](const char* name, int64_t absent) {
    const AttrValue& value = node.attrs().get(name);
    return std::holds_alternative<std::monostate>(value) ? absent : node.attrs().get_int(name);
  };
  slice_of(node, c, dim, optional("start", 0), optional("end", INT64_MAX),
           node.attrs().get_int("step"));
}

void select(const Node& node, ExportContext& c) {
  int64_t rank = rank_of(node.input(0));
  int64_t dim = wrap(node.attrs().get_int("dim"), rank);
  int64_t index = node.attrs().get_int("index");
  if (index < 0) index += static_shape(node.input(0))[size_t(dim)];
  Tensor scalar_index = full({}, index, DType::Int64);
  auto& made =
      c.node_for(node.output(), "Gather", {c.name(node.input(0)), c.initializer(scalar_index)});
  set_attr(made, "axis", dim);
}

// split and chunk: one Split with the sizes of the outputs.
void split(const Node& node, ExportContext& c) {
  int64_t rank = rank_of(node.input(0));
  int64_t dim = wrap(node.attrs().get_int("dim"), rank);
  std::vector<int64_t> sizes;
  std::vector<std::string> outputs;
  for (const jit::Value* output : node.outputs()) {
    sizes.push_back(static_shape(output)[size_t(dim)]);
    std::string name = c.fresh(str("v", output->id()));
    c.bind(output, name);
    outputs.push_back(name);
  }
  auto& made = c.node("Split", {c.name(node.input(0)), c.ints(sizes)}, outputs);
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
  IntList index_shape = static_shape(node.input(1));
  std::string src = c.name(node.input(2));
  if (static_shape(node.input(2)) != index_shape) {
    std::vector<int64_t> zeros(index_shape.size(), 0), axes;
    for (size_t i = 0; i < index_shape.size(); ++i)
      axes.push_back(int64_t(i));
    src = c.temp("Slice", {src, c.ints(zeros), c.ints(index_shape), c.ints(axes)});
  }
  auto& made = c.node_for(node.output(), "ScatterElements",
                          {c.name(node.input(0)), c.name(node.input(1)), src});
  set_attr(made, "axis", dim);
  set_attr(made, "reduction", std::string("add"));
}

void one_hot(const Node& node, ExportContext& c) {
  need_rank(node, node.input(0), "input");
  int64_t classes = static_shape(node.output()).back();
  Tensor values = empty({2}, DType::Int64);
  values.data<int64_t>()[0] = 0;
  values.data<int64_t>()[1] = 1;
  auto& made = c.node_for(node.output(), "OneHot",
                          {c.name(node.input(0)), c.ints({classes}), c.initializer(values)});
  set_attr(made, "axis", int64_t(-1));
}

void matmul(const Node& node, ExportContext& c) {
  c.node_for(node.output(), "MatMul", {c.name(node.input(0)), c.name(node.input(1))});
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
  table["one_hot"] = one_hot;
  table["matmul"] = matmul;
  table["linear"] = linear;
  table["addmm"] = addmm;
}

}  // namespace kiln::onnx
