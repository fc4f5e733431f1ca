// nonzero, unique and non_max_suppression: ops of the table whose output
// sizes the data decides, each a fresh size symbol that the node binds when
// it runs. See Note [Data-dependent output shapes] in data_dependent.h.
#include <algorithm>

#include "kiln/core/shape.h"
#include "kiln/ops/data_dependent.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/registry.h"

namespace kiln {
namespace {

constexpr const char* kNotExportable =
    "its output size is a run-time size symbol; the ONNX exporter writes graphs whose sizes "
    "follow from their inputs' only";

using RunFn = std::vector<Tensor> (*)(std::span<const Tensor> inputs, const Attrs& attrs);
using BoundFn = std::optional<Dim> (*)(std::span<const TensorMeta> inputs, const Attrs& attrs);

struct DataDependentOp {
  const char* name;
  const char* stem;  // of the symbols its nodes bind
  RunFn run;
  BoundFn bound;
};

AttrSpec size_symbol_spec() {
  return {kSizeSymbolAttr, AttrKind::String, std::string()};
}

// Never called: dispatch runs these ops through run_data_dependent, since no
// buffer of a size fixed before the run can hold their outputs.
void runs_through_dispatch(const KernelArgs&) {
  KILN_CHECK(false,
             "a data-dependent op has no kernel over outputs allocated before it runs; "
             "dispatch runs it (Note [Data-dependent output shapes])");
}

// ---- nonzero: [n, x.dim()] coordinates ----

InferResult infer_nonzero(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  const Dim rows = size_symbol_of(args.op, args.attrs);
  return InferResult{{TensorMeta{DType::Int64, {rows, Dim(x.dim())}}}, {}};
}

std::vector<Tensor> run_nonzero(std::span<const Tensor> in, const Attrs&) {
  return {detail::nonzero_of(in[0])};
}

std::optional<Dim> bound_nonzero(std::span<const TensorMeta> in, const Attrs&) {
  return numel_of(in[0].shape);
}

// ---- unique: values, first_indices, inverse, counts ----

std::optional<int64_t> unique_dim(const TensorMeta& x, const Attrs& attrs) {
  if (!attrs.has("dim")) return std::nullopt;
  return wrap_dim(attrs.get_int("dim"), x.dim(), "unique", x.shape);
}

InferResult infer_unique(const InferArgs& args) {
  const TensorMeta& x = args.inputs[0];
  const Dim u = size_symbol_of(args.op, args.attrs);
  const std::optional<int64_t> d = unique_dim(x, args.attrs);
  KILN_CHECK_VALUE(!d || x.dim() > 0, "unique: dim given for a 0-d input");
  DimList values = {u}, inverse = x.shape;
  if (d) {
    values = x.shape;
    values[size_t(*d)] = u;
    inverse = {x.shape[size_t(*d)]};
  }
  return InferResult{{TensorMeta{x.dtype, values}, TensorMeta{DType::Int64, {u}},
                      TensorMeta{DType::Int64, inverse}, TensorMeta{DType::Int64, {u}}},
                     {}};
}

std::vector<Tensor> run_unique(std::span<const Tensor> in, const Attrs& attrs) {
  std::optional<int64_t> dim;
  if (attrs.has("dim")) dim = attrs.get_int("dim");
  UniqueAll r = detail::unique_all_of(in[0], attrs.get_bool("sorted"), dim);
  return {r.values, r.first_indices, r.inverse, r.counts};
}

std::optional<Dim> bound_unique(std::span<const TensorMeta> in, const Attrs& attrs) {
  const std::optional<int64_t> d = unique_dim(in[0], attrs);
  return d ? in[0].shape[size_t(*d)] : numel_of(in[0].shape);
}

// ---- non_max_suppression: [n, 3] (batch, class, box) ----

InferResult infer_nms(const InferArgs& args) {
  const TensorMeta& boxes = args.inputs[0];
  const TensorMeta& scores = args.inputs[1];
  KILN_CHECK_VALUE(boxes.dim() == 3 && equal_or_assumed(boxes.shape[2], Dim(4)),
                   "non_max_suppression: boxes must be [batches, boxes, 4], got ", boxes.shape);
  KILN_CHECK_VALUE(scores.dim() == 3, "non_max_suppression: scores must be [batches, classes, ",
                   "boxes], got ", scores.shape);
  KILN_CHECK_VALUE(equal_or_assumed(boxes.shape[0], scores.shape[0]) &&
                       equal_or_assumed(boxes.shape[1], scores.shape[2]),
                   "non_max_suppression: boxes ", boxes.shape, " and scores ", scores.shape,
                   " disagree on the batches or the boxes");
  KILN_CHECK_TYPE(is_floating(boxes.dtype) && is_floating(scores.dtype),
                  "non_max_suppression: boxes and scores must be floating point, got ", boxes.dtype,
                  " and ", scores.dtype);
  for (size_t i = 2; i < args.inputs.size(); ++i) {
    const TensorMeta& s = args.inputs[i];
    KILN_CHECK_VALUE(!s.defined || s.dim() <= 1, "non_max_suppression: input ", i,
                     " must be a scalar or hold one value, got shape ", s.shape);
  }
  const Dim rows = size_symbol_of(args.op, args.attrs);
  return InferResult{{TensorMeta{DType::Int64, {rows, Dim(3)}}}, {}};
}

std::vector<Tensor> run_nms(std::span<const Tensor> in, const Attrs& attrs) {
  return {detail::non_max_suppression_of(in, attrs.get_bool("center_point_box"))};
}

std::optional<Dim> bound_nms(std::span<const TensorMeta> in, const Attrs&) {
  const DimList& scores = in[1].shape;
  return scores[0] * scores[1] * scores[2];
}

const DataDependentOp kOps[] = {
    {"nonzero", "nz", run_nonzero, bound_nonzero},
    {"unique", "uniq", run_unique, bound_unique},
    {"non_max_suppression", "nms", run_nms, bound_nms},
};

const DataDependentOp* find_entry(const OpDef& op) {
  const bool binds = std::any_of(op.attrs.begin(), op.attrs.end(),
                                 [](const AttrSpec& s) { return s.name == kSizeSymbolAttr; });
  if (!binds) return nullptr;
  for (const DataDependentOp& entry : kOps) {
    if (op.name == entry.name) return &entry;
  }
  return nullptr;
}

}  // namespace

std::string size_symbol_stem(const OpDef& op) {
  const DataDependentOp* entry = find_entry(op);
  return entry ? entry->stem : "";
}

Dim size_symbol_of(const OpDef& op, const Attrs& attrs) {
  const std::string& name = attrs.get_string(kSizeSymbolAttr);
  return Dim::symbol(name.empty() ? size_symbol_stem(op) : name);
}

std::optional<Dim> size_symbol_bound(const OpDef& op, std::span<const TensorMeta> inputs,
                                     const Attrs& attrs) {
  const DataDependentOp* entry = find_entry(op);
  return entry ? entry->bound(inputs, attrs) : std::nullopt;
}

std::vector<Tensor> run_data_dependent(const OpDef& op, std::span<const Tensor> inputs,
                                       const Attrs& attrs) {
  const DataDependentOp* entry = find_entry(op);
  KILN_CHECK(entry != nullptr, op.name, ": infer gave a symbolic output size for concrete inputs");
  // The body is eager code over plain tensors: the ops it calls are its own
  // business, not a trace's or autograd's (its outputs carry no gradient).
  PauseRecording pause;
  std::vector<Tensor> plain;
  for (const Tensor& t : inputs)
    plain.push_back(t.defined() ? make_view(t, t.shape(), t.strides(), t.offset()) : Tensor());
  return entry->run(plain, attrs);
}

void register_data_dependent_ops(OpRegistry& registry) {
  registry.add(OpDef{.name = "nonzero",
                     .attrs = {size_symbol_spec()},
                     .infer = infer_nonzero,
                     .cpu = runs_through_dispatch,
                     .differentiable = false,
                     .onnx = onnx_not_exportable(kNotExportable)});
  registry.add(OpDef{.name = "unique",
                     .num_outputs = 4,
                     .attrs = {{"sorted", AttrKind::Bool, true},
                               {"dim", AttrKind::Int, {}, true},
                               size_symbol_spec()},
                     .infer = infer_unique,
                     .cpu = runs_through_dispatch,
                     .differentiable = false,
                     .onnx = onnx_not_exportable(kNotExportable)});
  registry.add(OpDef{.name = "non_max_suppression",
                     .min_inputs = 2,
                     .max_inputs = 5,
                     .optional_inputs = {2, 3, 4},
                     .attrs = {{"center_point_box", AttrKind::Bool, false}, size_symbol_spec()},
                     .infer = infer_nms,
                     .cpu = runs_through_dispatch,
                     .differentiable = false,
                     .onnx = onnx_not_exportable(kNotExportable)});
}

}  // namespace kiln
