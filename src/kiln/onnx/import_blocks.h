// What the translations of ONNX's control flow share (import_control_flow.cpp
// for If and Loop, import_scan.cpp for Scan): an ONNX sub-graph imported as
// a block of its own, and the checks on the values a loop carries.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kiln/onnx/import_context.h"

namespace kiln::onnx {

// The sub-graph attribute `name` of `node`; throws naming it when absent.
const pb::GraphProto& graph_attr(const pb::NodeProto& node, const std::string& name);

// An ONNX sub-graph imported as a block of its own.
struct Block {
  std::unique_ptr<jit::Graph> graph;
  std::vector<jit::Value*> outputs;   // the sub-graph's outputs, values of `graph`
  std::vector<jit::Value*> captures;  // outer values, one per input after the formal ones
};

// The sub-graph `attr` of `node`, its formal inputs typed `formal` (ONNX's
// declared types are often looser than what flows in).
Block import_block(const pb::NodeProto& node, const std::string& attr,
                   const std::vector<TensorMeta>& formal, ImportContext& c);

std::vector<jit::Value*> join(std::vector<jit::Value*> a, const std::vector<jit::Value*>& b);
std::vector<TensorMeta> types_of(const std::vector<jit::Value*>& values);

// The block's output `after` keeps the type of the value `before` it carries.
void check_carried(const pb::NodeProto& node, const std::string& body, const jit::Value* before,
                   const jit::Value* after, const std::string& name);

// Values a loop carries or scans are tensors at run time: sizes computed at
// import from symbolic dims are refused, naming them.
void check_tensors(ImportContext& c, const std::vector<jit::Value*>& values,
                   const std::string& why);

// Scan (import_scan.cpp).
void add_scan_importers(std::unordered_map<std::string, ImportFn>& table);

}  // namespace kiln::onnx
