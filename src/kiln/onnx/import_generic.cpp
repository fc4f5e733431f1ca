// The generic importer: an ONNX node whose op type an OpDef declares as its
// one-to-one form (OnnxInfo, ops/op.h) becomes that kiln op over the same
// inputs, its attributes renamed and converted by the kiln attribute's kind;
// one the node leaves out takes ONNX's default where the OpDef gives one.
// The hand-written importers (import_*.cpp) cover the rest.
#include "kiln/onnx/import_table.h"
#include "kiln/onnx/one_source.h"
#include "kiln/ops/registry.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using Node = pb::NodeProto;

// ONNX op type -> the kiln op that declares it, built once. Two ops
// declaring one ONNX op type would make the import ambiguous: an error.
const std::unordered_map<std::string, const OpDef*>& declared_imports() {
  static const std::unordered_map<std::string, const OpDef*> by_type = [] {
    std::unordered_map<std::string, const OpDef*> table;
    for (const OpDef* def : op_registry().all()) {
      if (!def->onnx.imports_generically()) continue;
      auto [found, added] = table.emplace(def->onnx.op_type, def);
      KILN_CHECK(added, "onnx import: ONNX's ", def->onnx.op_type,
                 " is declared the one-to-one form of two kiln ops, ", found->second->name, " and ",
                 def->name);
    }
    return table;
  }();
  return by_type;
}

AttrKind kind_of(const OpDef& def, const std::string& name) {
  for (const AttrSpec& spec : def.attrs)
    if (spec.name == name) return spec.kind;
  KILN_CHECK(false, "onnx import: ", def.name, "'s ONNX form names the attribute '", name,
             "', which the op does not have");
  return AttrKind::Int;
}

AttrValue converted(const pb::AttributeProto& attr, AttrKind kind, const std::string& what) {
  switch (kind) {
    case AttrKind::Bool:
      return attr.i() != 0;
    case AttrKind::Int:
      return int64_t(attr.i());
    case AttrKind::Float:
      return attr.type() == pb::AttributeProto_AttributeType_INT ? double(attr.i())
                                                                 : double(attr.f());
    case AttrKind::Ints:
      return IntList(attr.ints().begin(), attr.ints().end());
    case AttrKind::DType:
      return dtype_from_onnx(attr.i(), what);
    case AttrKind::String:
      return attr.s();
  }
  return {};
}

void import_one_to_one(const Node& node, ImportContext& c) {
  const OpDef& def = *declared_imports().at(node.op_type());
  const OnnxInfo& info = def.onnx;
  KILN_CHECK(c.opset() >= info.min_opset && c.opset() <= info.max_opset,
             "onnx import: ", node.op_type(), " at opset ", c.opset(),
             " is not one kiln reads (it reads ", info.opsets(), ")");
  std::vector<jit::Value*> inputs;
  for (int i = 0; i < node.input_size(); ++i)
    inputs.push_back(c.input(node, i));
  while (!inputs.empty() && !inputs.back())
    inputs.pop_back();  // absent trailing optional inputs
  Attrs attrs;
  for (const OnnxAttr& attr : info.attrs) {
    AttrKind kind = kind_of(def, attr.kiln);
    if (const pb::AttributeProto* given = find_attr(node, attr.onnx)) {
      attrs.set(attr.kiln, converted(*given, kind, node.op_type() + "'s " + attr.onnx));
    } else if (!std::holds_alternative<std::monostate>(attr.onnx_default)) {
      attrs.set(attr.kiln, attr.onnx_default);
    }
  }
  if (def.num_outputs == 1) return define(node, c, c.emit(def.name, inputs, attrs));
  std::vector<jit::Value*> outputs = c.emit_multi(def.name, inputs, attrs);
  for (int i = 0; i < node.output_size() && size_t(i) < outputs.size(); ++i)
    define(node, c, outputs[size_t(i)], i);
}

}  // namespace

void add_generic_importers(Table& table) {
  declared_imports();  // first: two ops declaring one ONNX op type is the error then
  for (const OpDef* def : op_registry().all()) {
    if (def->onnx.imports_generically())
      add_generic_translator(table, def->onnx.op_type, ImportFn(import_one_to_one), "import");
  }
}

}  // namespace kiln::onnx
