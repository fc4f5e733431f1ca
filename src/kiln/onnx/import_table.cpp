// The importer's table: ONNX op type -> translation. Each import_*.cpp file
// adds its ops; importable_ops() lists the table, so what kiln says it
// imports is what it translates.
#include <algorithm>

#include "kiln/onnx/import_util.h"
#include "kiln/onnx/onnx_import.h"

namespace kiln::onnx {
namespace {

const Table& importers() {
  static const Table table = [] {
    Table all;
    add_basic_importers(all);
    add_nn_importers(all);
    add_resample_importers(all);
    add_math_importers(all);
    add_shape_importers(all);
    add_control_flow_importers(all);
    add_rnn_importers(all);
    add_loss_importers(all);
    add_indexing_importers(all);
    add_activation_importers(all);
    return all;
  }();
  return table;
}

}  // namespace

ImportFn find_importer(const std::string& op_type) {
  auto found = importers().find(op_type);
  return found == importers().end() ? nullptr : found->second;
}

std::vector<std::string> importable_ops() {
  std::vector<std::string> names;
  for (const auto& [name, translate] : importers())
    names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace kiln::onnx
