// ONNX translations of the ops that order or walk a tensor along dims.
//
//   sort, argsort, topk  -> TopK (sort's k: the size of its dim; ascending:
//                           largest=0). TopK puts the lower index first
//                           among equal values, as a stable sort does.
//   cumsum               -> CumSum
//   cumprod              -> Scan whose step multiplies a running product
//   flip                 -> Slice with step -1 per flipped dim
//   roll                 -> Concat(x[n - s:], x[:n - s]) per rolled dim
//
// cumsum and cumprod accumulate floats in double, as kiln's kernel and
// PyTorch's CPU kernel do, so the bits agree.
#include <climits>
#include <map>

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

int64_t wrapped_dim(const Node& node, const char* name = "dim") {
  int64_t dim = node.attrs().get_int(name);
  return dim < 0 ? dim + std::max<int64_t>(rank_of(node.input(0)), 1) : dim;
}

// ---- sort, argsort, topk ----

// A 0-d input is its own sort: itself, at index 0.
bool zero_dim_order(const Node& node, ExportContext& c) {
  if (rank_of(node.input(0)) != 0) return false;
  std::string index = c.initializer(full({}, int64_t(0), DType::Int64));
  bool values = node.outputs().size() == 2;
  if (values) c.node_for(node.output(0), "Identity", {c.name(node.input(0))});
  c.node_for(node.output(values ? 1 : 0), "Identity", {index});
  return true;
}

// TopK over `dim`; writes the values (unless `values` is null) and indices.
// Bools are ordered as int32 (TopK takes numbers), their values cast back.
void top_k(const Node& node, ExportContext& c, const std::string& k, bool largest,
           const jit::Value* values, const jit::Value* indices) {
  bool is_bool = node.input(0)->dtype() == DType::Bool;
  std::string x = c.as_dtype(node.input(0), is_bool ? DType::Int32 : node.input(0)->dtype());
  std::string values_name = c.fresh("t"), indices_name = c.fresh("t");
  auto& made = c.node("TopK", {x, k}, {values_name, indices_name});
  set_attr(made, "axis", wrapped_dim(node));
  set_attr(made, "largest", int64_t(largest));
  set_attr(made, "sorted", int64_t(1));
  if (values) {
    auto& written = c.node_for(values, is_bool ? "Cast" : "Identity", {values_name});
    if (is_bool) set_attr(written, "to", int64_t(onnx_dtype(DType::Bool)));
  }
  c.node_for(indices, "Identity", {indices_name});
}

// The size of the sorted dim; with a dynamic batch, the batch's is read at
// run time.
std::string dim_size(const Node& node, ExportContext& c) {
  int64_t dim = wrapped_dim(node);
  if (dim != 0 || !c.dynamic_batch()) return c.size(node.input(0)->shape()[size_t(dim)]);
  return c.temp("Slice", {c.temp("Shape", {c.name(node.input(0))}), c.ints({0}), c.ints({1})});
}

void sort(const Node& node, ExportContext& c) {
  if (zero_dim_order(node, c)) return;
  bool largest = node.attrs().get_bool("descending");
  top_k(node, c, dim_size(node, c), largest, node.output(0), node.output(1));
}

void argsort(const Node& node, ExportContext& c) {
  if (zero_dim_order(node, c)) return;
  top_k(node, c, dim_size(node, c), node.attrs().get_bool("descending"), nullptr, node.output());
}

// sorted=False: kiln returns the sorted order, which TopK's sorted=1 gives.
void topk(const Node& node, ExportContext& c) {
  if (zero_dim_order(node, c)) return;
  std::string k = c.ints({node.attrs().get_int("k")});
  top_k(node, c, k, node.attrs().get_bool("largest"), node.output(0), node.output(1));
}

// ---- cumsum, cumprod ----

// The type a running total is kept in: double for floats, else the output's.
DType accumulator(DType out) {
  return is_floating(out) ? DType::Float64 : out;
}

// The input as the accumulator type, and the result written back as the
// output's dtype.
std::string accumulated_input(const Node& node, ExportContext& c) {
  return c.as_dtype(node.input(0), accumulator(node.output()->dtype()));
}

void write_result(const Node& node, ExportContext& c, const std::string& total) {
  DType out = node.output()->dtype();
  if (accumulator(out) == out) {
    c.node_for(node.output(), "Identity", {total});
    return;
  }
  auto& made = c.node_for(node.output(), "Cast", {total});
  set_attr(made, "to", int64_t(onnx_dtype(out)));
}

void cumsum(const Node& node, ExportContext& c) {
  std::string x = accumulated_input(node, c);
  if (rank_of(node.input(0)) == 0) return write_result(node, c, x);
  std::string axis = c.initializer(full({}, wrapped_dim(node), DType::Int64));
  write_result(node, c, c.temp("CumSum", {x, axis}));
}

// A Scan body input or output: the element type and the rank.
void add_body_value(google::protobuf::RepeatedPtrField<pb::ValueInfoProto>* list,
                    const std::string& name, DType dtype, int64_t rank) {
  pb::ValueInfoProto* info = list->Add();
  info->set_name(name);
  pb::TypeProto_Tensor* tensor = info->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(onnx_dtype(dtype));
  pb::TensorShapeProto* shape = tensor->mutable_shape();
  for (int64_t i = 0; i < rank; ++i)
    shape->add_dim();
}

// Nothing to multiply (ONNX Runtime's Scan fails on zero iterations).
bool is_empty(const DimList& shape) {
  for (const Dim& dim : shape)
    if (dim.is_static() && dim.static_value() == 0) return true;
  return false;
}

// Scan over `dim` carrying the product so far (ones at first): each step
// writes product * x_t as both the new state and that step's output.
void cumprod(const Node& node, ExportContext& c) {
  std::string x = accumulated_input(node, c);
  int64_t rank = rank_of(node.input(0));
  if (rank == 0 || is_empty(node.input(0)->shape())) return write_result(node, c, x);
  int64_t dim = wrapped_dim(node);
  DType acc = accumulator(node.output()->dtype());
  // Ones shaped as one step's slice, whatever the sizes at run time.
  pb::NodeProto* made = nullptr;
  std::string first =
      c.temp("Gather", {x, c.initializer(full({}, int64_t(0), DType::Int64))}, &made);
  set_attr(*made, "axis", dim);
  std::string ones = c.temp("Expand", {c.scalar(1.0, acc), c.temp("Shape", {first})});

  std::string state = c.fresh("t"), product = c.fresh("t");
  auto& scan = c.node("Scan", {ones, x}, {state, product});
  set_attr(scan, "num_scan_inputs", int64_t(1));
  set_attr(scan, "scan_input_axes", std::vector<int64_t>{dim});
  set_attr(scan, "scan_output_axes", std::vector<int64_t>{dim});
  pb::AttributeProto* attr = scan.add_attribute();
  attr->set_name("body");
  attr->set_type(pb::AttributeProto_AttributeType_GRAPH);
  pb::GraphProto& body = *attr->mutable_g();
  body.set_name(c.fresh("cumprod_body"));
  ExportContext step(body, c);
  std::string so_far = step.fresh("product_in"), element = step.fresh("x_t");
  add_body_value(body.mutable_input(), so_far, acc, rank - 1);
  add_body_value(body.mutable_input(), element, acc, rank - 1);
  std::string next = step.temp("Mul", {so_far, element});
  std::string out = step.temp("Identity", {next});
  add_body_value(body.mutable_output(), next, acc, rank - 1);
  add_body_value(body.mutable_output(), out, acc, rank - 1);
  write_result(node, c, product);
}

// ---- flip, roll ----

void flip(const Node& node, ExportContext& c) {
  std::string x = c.name(node.input(0));
  int64_t rank = rank_of(node.input(0));
  std::vector<int64_t> axes;
  for (int64_t d : node.attrs().get_ints("dims"))
    if (rank > 0) axes.push_back(d < 0 ? d + rank : d);
  if (axes.empty()) {
    c.node_for(node.output(), "Identity", {x});
    return;
  }
  std::vector<int64_t> starts(axes.size(), -1), ends(axes.size(), INT64_MIN),
      steps(axes.size(), -1);
  c.node_for(node.output(), "Slice",
             {x, c.ints(starts), c.ints(ends), c.ints(axes), c.ints(steps)});
}

// x rolled by `shift` (in [1, n)) along `axis`: its last `shift` elements
// first.
std::string roll_axis(const std::string& x, int64_t axis, int64_t n, int64_t shift,
                      ExportContext& c) {
  std::string tail = c.temp("Slice", {x, c.ints({n - shift}), c.ints({n}), c.ints({axis})});
  std::string head = c.temp("Slice", {x, c.ints({0}), c.ints({n - shift}), c.ints({axis})});
  pb::NodeProto* made = nullptr;
  std::string out = c.temp("Concat", {tail, head}, &made);
  set_attr(*made, "axis", axis);
  return out;
}

// The shift of each rolled dim, summed where a dim is given twice (over
// the flattened input without dims).
std::map<int64_t, int64_t> roll_shifts(const Node& node) {
  const IntList& shifts = node.attrs().get_ints("shifts");
  const IntList& dims = node.attrs().get_ints("dims");
  int64_t rank = rank_of(node.input(0));
  std::map<int64_t, int64_t> total;
  for (size_t j = 0; j < shifts.size(); ++j)
    total[dims.empty() ? 0 : (dims[j] < 0 ? dims[j] + rank : dims[j])] += shifts[j];
  return total;
}

// Without dims the row-major order rolls: over the flattened input,
// reshaped back to its shape. A rolled dim's size must be known: the shift
// wraps at it.
void roll(const Node& node, ExportContext& c) {
  bool flat = node.attrs().get_ints("dims").empty();
  std::map<int64_t, int64_t> shifts = roll_shifts(node);
  KILN_CHECK(!(c.dynamic_batch() && (flat || shifts.count(0) > 0)),
             "onnx export: roll across the batch dim with a dynamic batch (the shift wraps "
             "at the batch size, fixed at export)");
  std::string input = c.name(node.input(0)), x = input;
  DimList sizes = node.input(0)->shape();
  if (flat) {
    Dim count = 1;
    for (const Dim& size : sizes)
      count *= size;
    sizes = {count};
    x = c.temp("Reshape", {x, c.ints({-1})});
  }
  for (const auto& [dim, shift] : shifts) {
    int64_t n = require_static(sizes[size_t(dim)], "onnx export: roll",
                               "size of a rolled dim (the shift wraps at it)");
    int64_t wrapped = n == 0 ? 0 : ((shift % n) + n) % n;
    if (wrapped != 0) x = roll_axis(x, dim, n, wrapped, c);
  }
  if (flat) {
    c.node_for(node.output(), "Reshape", {x, c.temp("Shape", {input})});
    return;
  }
  c.node_for(node.output(), "Identity", {x});
}

}  // namespace

void add_order_exporters(Table& table) {
  table["sort"] = sort;
  table["argsort"] = argsort;
  table["topk"] = topk;
  table["cumsum"] = cumsum;
  table["cumprod"] = cumprod;
  table["flip"] = flip;
  table["roll"] = roll;
}

}  // namespace kiln::onnx
