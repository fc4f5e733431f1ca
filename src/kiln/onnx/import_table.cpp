// The importer's table: ONNX op type -> translation. Each import_*.cpp file
// adds its hand-written ops, import_generic.cpp the ones OpDefs declare
// one-to-one; importable_ops() lists the table, so what kiln says it
// imports is what it translates, and check_every_op_translates() reads it
// to name every op a model needs and kiln lacks, before translating any.
#include "kiln/onnx/import_table.h"

#include <algorithm>
#include <map>

#include "kiln/onnx/onnx_import.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

const Table& importers() {
  static const Table table = [] {
    Table all;
    add_basic_importers(all);
    add_nn_importers(all);
    add_conv_pool_importers(all);
    add_resample_importers(all);
    add_math_importers(all);
    add_shape_importers(all);
    add_control_flow_importers(all);
    add_rnn_importers(all);
    add_loss_importers(all);
    add_indexing_importers(all);
    add_activation_importers(all);
    add_sequence_importers(all);
    add_dynamic_importers(all);
    add_signal_importers(all);
    add_training_importers(all);
    add_quant_importers(all);
    add_vision_importers(all);
    add_geometry_importers(all);
    add_generic_importers(all);  // last: refuses an op type a file above translates
    return all;
  }();
  return table;
}

bool default_domain(const pb::NodeProto& node) {
  return node.domain().empty() || node.domain() == "ai.onnx";
}

}  // namespace

// An op of the default domain is keyed by its type alone, one of another
// domain as "domain:type" (ai.onnx.preview.training:Adam).
std::string table_key(const pb::NodeProto& node) {
  return default_domain(node) ? node.op_type() : node.domain() + ":" + node.op_type();
}

namespace {

// The nodes of one missing op, in the order the model lists them.
struct Missing {
  size_t first_seen;
  std::vector<std::string> nodes;
};

std::string label(const pb::NodeProto& node) {
  if (!node.name().empty()) return "'" + node.name() + "'";
  if (node.output_size() > 0) return "the one writing '" + node.output(0) + "'";
  return "an unnamed one";
}

void collect_missing(const pb::GraphProto& graph, std::map<std::string, Missing>& missing) {
  for (const pb::NodeProto& node : graph.node()) {
    std::string op = table_key(node);
    if (importers().count(op) == 0) {
      auto [found, added] = missing.emplace(op, Missing{missing.size(), {}});
      found->second.nodes.push_back(label(node));
    }
    for (const pb::AttributeProto& attr : node.attribute()) {
      if (attr.has_g()) collect_missing(attr.g(), missing);
      for (const pb::GraphProto& body : attr.graphs())
        collect_missing(body, missing);
    }
  }
}

// "'Foo' (node 'a')" or "'Foo' (3 nodes: 'a', 'b', 'c')", at most five names.
std::string describe(const std::string& op, const Missing& where) {
  constexpr size_t kShown = 5;
  std::string text = "'" + op + "' (";
  size_t count = where.nodes.size();
  text += count == 1 ? "node " : std::to_string(count) + " nodes: ";
  for (size_t i = 0; i < std::min(count, kShown); ++i)
    text += (i ? ", " : "") + where.nodes[i];
  if (count > kShown) text += ", ...";
  return text + ")";
}

}  // namespace

ImportFn find_importer(const pb::NodeProto& node) {
  auto found = importers().find(table_key(node));
  return found == importers().end() ? nullptr : found->second;
}

std::vector<std::string> importable_ops() {
  std::vector<std::string> names;
  for (const auto& [name, translate] : importers())
    names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

void check_every_op_translates(const pb::GraphProto& graph) {
  std::map<std::string, Missing> missing;
  collect_missing(graph, missing);
  if (missing.empty()) return;
  std::vector<std::pair<std::string, const Missing*>> in_order;
  for (const auto& [op, where] : missing)
    in_order.emplace_back(op, &where);
  std::sort(in_order.begin(), in_order.end(), [](const auto& a, const auto& b) {
    return a.second->first_seen < b.second->first_seen;
  });
  if (in_order.size() == 1 && in_order[0].second->nodes.size() == 1) {
    KILN_CHECK(false, "onnx import: op ", describe(in_order[0].first, *in_order[0].second),
               " has no kiln translation");
  }
  std::string list;
  for (const auto& [op, where] : in_order)
    list += (list.empty() ? "" : ", ") + describe(op, *where);
  KILN_CHECK(false, "onnx import: each of these ops has no kiln translation: ", list,
             " (kiln.onnx.importable_ops() lists what it translates)");
}

}  // namespace kiln::onnx
