// The generic exporter: an op whose OpDef declares a one-to-one ONNX form
// (OnnxInfo, ops/op.h) is written as that ONNX op, its inputs in order
// (cast as OnnxInfo::operands says), its attributes renamed and converted
// by their kind. The hand-written exporters (export_*.cpp) cover the ops
// whose ONNX form differs in structure.
#include "kiln/onnx/export_context.h"
#include "kiln/onnx/one_source.h"
#include "kiln/ops/registry.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using jit::Node;

const AttrSpec& spec_of(const OpDef& def, const std::string& name) {
  for (const AttrSpec& spec : def.attrs)
    if (spec.name == name) return spec;
  KILN_CHECK(false, "onnx export: ", def.name, "'s ONNX form names the attribute '", name,
             "', which the op does not have");
  return def.attrs.front();
}

void set_converted(pb::NodeProto& made, const std::string& onnx_name, const Attrs& attrs,
                   const AttrSpec& spec) {
  switch (spec.kind) {
    case AttrKind::Bool:
      return set_attr(made, onnx_name, int64_t(attrs.get_bool(spec.name)));
    case AttrKind::Int:
      return set_attr(made, onnx_name, attrs.get_int(spec.name));
    case AttrKind::Float:
      return set_attr(made, onnx_name, float(attrs.get_float(spec.name)));
    case AttrKind::Ints: {
      const IntList& values = attrs.get_ints(spec.name);
      return set_attr(made, onnx_name, std::vector<int64_t>(values.begin(), values.end()));
    }
    case AttrKind::DType:
      return set_attr(made, onnx_name, int64_t(onnx_dtype(attrs.get_dtype(spec.name))));
    case AttrKind::String:
      return set_attr(made, onnx_name, attrs.get_string(spec.name));
  }
}

void export_one_to_one(const Node& node, ExportContext& c) {
  const OpDef& def = node.op();
  const OnnxInfo& info = def.onnx;
  KILN_CHECK(c.opset() >= info.min_opset && c.opset() <= info.max_opset, "onnx export: ", def.name,
             " is written as ONNX's ", info.op_type, ", which holds at ", info.opsets(),
             "; exporting at opset ", c.opset());
  // A binary op over bools computes as int32 (ONNX's arithmetic and ordering
  // take no bools: add is or, mul is and) and casts back.
  bool bools_as_int = false;
  std::vector<std::string> inputs;
  for (size_t i = 0; i < node.inputs().size(); ++i) {
    const jit::Value* input = node.input(i);
    if (!input) {
      inputs.push_back("");
      continue;
    }
    switch (info.operand(i)) {
      case OnnxOperand::AsIs:
        inputs.push_back(c.name(input));
        break;
      case OnnxOperand::Output:
        inputs.push_back(c.as_dtype(input, node.output()->dtype()));
        break;
      case OnnxOperand::Bool:
        inputs.push_back(c.as_dtype(input, DType::Bool));
        break;
      case OnnxOperand::Promoted: {
        DType dtype = binary_compute_dtype(node);
        bools_as_int = dtype == DType::Bool;
        inputs.push_back(c.as_dtype(input, bools_as_int ? DType::Int32 : dtype));
        break;
      }
    }
  }
  std::vector<std::string> outputs;
  for (const jit::Value* output : node.outputs()) {
    std::string name = c.fresh(str("v", output->id()));
    if (!bools_as_int) c.bind(output, name);
    outputs.push_back(name);
  }
  pb::NodeProto& made = c.node(info.op_type, inputs, outputs);
  for (const OnnxAttr& attr : info.attrs) {
    const AttrSpec& spec = spec_of(def, attr.kiln);
    if (!node.attrs().has(attr.kiln)) continue;  // None: ONNX's attribute left out
    set_converted(made, attr.onnx, node.attrs(), spec);
  }
  if (!bools_as_int) return;
  auto& cast = c.node_for(node.output(), "Cast", {outputs.at(0)});
  set_attr(cast, "to", int64_t(onnx_dtype(DType::Bool)));
}

}  // namespace

DType binary_compute_dtype(const Node& node) {
  if (node.output()->dtype() != DType::Bool) return node.output()->dtype();
  ResultTypeState state;
  for (const jit::Value* input : node.inputs()) {
    if (input->type().wrapped_number) {
      state.add_wrapped_number(input->dtype());
    } else {
      state.add_tensor(input->dtype(), input->shape().empty());
    }
  }
  return state.result();
}

void add_generic_exporters(std::unordered_map<std::string, ExportFn>& table) {
  for (const OpDef* def : op_registry().all()) {
    if (def->onnx.exports_generically())
      add_generic_translator(table, def->name, ExportFn(export_one_to_one), "export");
  }
}

}  // namespace kiln::onnx
