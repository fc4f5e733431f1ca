// Every op of the table declares its ONNX status (OnnxInfo, ops/op.h): a
// translation (one-to-one in its OpDef, or a hand-written exporter) or the
// reason it has none; and a one-to-one declaration is complete and the
// only translation of its op.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "kiln/onnx/one_source.h"
#include "kiln/onnx/onnx_export.h"
#include "kiln/onnx/onnx_import.h"
#include "kiln/ops/registry.h"

namespace kiln::onnx {
namespace {

TEST(OnnxTable, EveryOpDeclaresItsOnnxStatus) {
  for (const OpDef* def : op_registry().all()) {
    const OnnxInfo& info = def->onnx;
    if (!info.not_exportable.empty()) {
      EXPECT_FALSE(can_export(def->name))
          << def->name << " exports, yet its OpDef says it cannot: " << info.not_exportable;
      EXPECT_FALSE(info.one_to_one) << def->name;
      continue;
    }
    EXPECT_TRUE(can_export(def->name))
        << "op '" << def->name
        << "' has no ONNX status: declare its one-to-one form (onnx_op in its OpDef), write "
           "an exporter (onnx/export_*.cpp), or say why it has none (onnx_not_exportable)";
  }
}

const AttrSpec* find_spec(const OpDef& def, const std::string& name) {
  for (const AttrSpec& spec : def.attrs)
    if (spec.name == name) return &spec;
  return nullptr;
}

// What the generic translators need: an ONNX op type, fixed outputs, every
// renamed attribute an attribute of the op, and for export every attribute
// renamed (one left out would be dropped silently).
TEST(OnnxTable, OneToOneDeclarationsAreComplete) {
  for (const OpDef* def : op_registry().all()) {
    const OnnxInfo& info = def->onnx;
    if (!info.one_to_one) continue;
    EXPECT_FALSE(info.op_type.empty()) << def->name;
    EXPECT_GE(def->num_outputs, 1) << def->name << ": the generic translators need fixed outputs";
    EXPECT_LE(info.min_opset, info.max_opset) << def->name;
    std::set<std::string> renamed;
    for (const OnnxAttr& attr : info.attrs) {
      EXPECT_TRUE(find_spec(*def, attr.kiln))
          << def->name << "'s ONNX form renames '" << attr.kiln << "', which it does not have";
      renamed.insert(attr.kiln);
    }
    if (!info.exports_generically()) continue;
    for (const AttrSpec& spec : def->attrs) {
      EXPECT_TRUE(renamed.count(spec.name))
          << def->name << " exports one-to-one but its attribute '" << spec.name
          << "' has no ONNX name";
    }
  }
}

// The import table takes the generic entries (importable_ops() builds it,
// and refuses an ONNX op type that a hand-written importer translates too
// or that two OpDefs declare): each declared op type is importable.
TEST(OnnxTable, DeclaredImportsAreInTheImportTable) {
  std::vector<std::string> importable;
  ASSERT_NO_THROW(importable = importable_ops());
  std::map<std::string, std::string> declared_by;
  for (const OpDef* def : op_registry().all()) {
    if (!def->onnx.imports_generically()) continue;
    auto [found, added] = declared_by.emplace(def->onnx.op_type, def->name);
    EXPECT_TRUE(added) << def->onnx.op_type << " is declared by " << found->second << " and "
                       << def->name;
    EXPECT_TRUE(std::binary_search(importable.begin(), importable.end(), def->onnx.op_type))
        << def->onnx.op_type << " (declared by " << def->name << ") is not importable";
  }
  EXPECT_GT(declared_by.size(), 30u);  // the generic importer is wired in at all
}

// One source: adding a generic translator under a key the table's
// hand-written ones hold is an error naming it, never a silent override
// either way.
TEST(OnnxTable, AHandWrittenAndAGenericTranslatorOfOneOpIsAnError) {
  std::unordered_map<std::string, int> table = {{"Erf", 1}};
  add_generic_translator(table, std::string("Tan"), 2, "import");
  EXPECT_EQ(table.at("Tan"), 2);
  try {
    add_generic_translator(table, std::string("Erf"), 3, "import");
    FAIL() << "a second translator of Erf was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'Erf' has a hand-written translator"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(table.at("Erf"), 1);
}

}  // namespace
}  // namespace kiln::onnx
