// Writing .kiln files (layout in model_file.h).
#include <cstring>

#include "kiln/io/mapped_file.h"
#include "kiln/io/model_file.h"
#include "kiln/io/model_format.h"
#include "kiln/io/tensor_records.h"
#include "kiln/jit/ir/printer.h"
#include "kiln/jit/ir/text_format.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/registry.h"

namespace kiln::jit {
namespace {

using io::Json;
using namespace model_format;

struct Blob {
  std::string_view role;
  std::string name;
  Tensor data;          // contiguous
  uint64_t offset = 0;  // from the start of the data section
};

std::string fresh_param_name(const Graph& graph, size_t index) {
  std::string base = "constant." + std::to_string(index);
  std::string name = base;
  for (int suffix = 1; graph.find_param(name); ++suffix)
    name = base + "_" + std::to_string(suffix);
  return name;
}

// Large constants (weights folded by a frozen compile) leave the graph text
// for blobs: as text they would take about three times the bytes and could
// not be mapped. In the file they are parameters that the reader turns back
// into constants; their names are listed with the role "constant".
std::vector<std::string> move_large_constants_to_params(Graph& graph) {
  std::vector<std::string> moved;
  for (Value* constant : std::vector<Value*>(graph.constants())) {
    if (constant->type().wrapped_number || constant->data().numel() <= kInlineConstantLimit)
      continue;
    std::string name = fresh_param_name(graph, moved.size());
    Value* param = graph.add_param(name, constant->type(), constant->data());
    constant->replace_all_uses_with(param);
    graph.remove_unused(constant);
    moved.push_back(std::move(name));
  }
  return moved;
}

Json state_update_record(const StateUpdate& update) {
  Json record = {{"output", update.output}};
  if (update.target == ValueKind::Param) {
    record["param"] = update.param;
  } else {
    record["input"] = update.input;
  }
  return record;
}

Json tensor_record(const Blob& blob) {
  const Tensor& data = blob.data;
  uint64_t nbytes = uint64_t(data.numel()) * element_size(data.dtype());
  return {{"role", blob.role},
          {"name", blob.name},
          {"dtype", short_name(data.dtype())},
          {"shape", data.shape()},
          {"offset", blob.offset},
          {"nbytes", nbytes},
          {"xxh3", to_hex(checksum(data.data_ptr(), nbytes))}};
}

std::vector<Blob> collect_blobs(const Graph& graph, const std::vector<std::string>& moved,
                                const std::vector<Tensor>& example_inputs,
                                const std::vector<Tensor>& example_outputs) {
  std::vector<Blob> blobs;
  for (const Value* param : graph.params()) {
    KILN_CHECK_VALUE(param->data().defined(), "save: parameter '", param->name(),
                     "' has no weights (a graph parsed from text has none until they are set)");
    bool is_constant = std::find(moved.begin(), moved.end(), param->name()) != moved.end();
    blobs.push_back({is_constant ? kConstant : kParam, param->name(), contiguous(param->data())});
  }
  for (size_t i = 0; i < example_inputs.size(); ++i)
    blobs.push_back({kExampleInput, std::to_string(i), contiguous(example_inputs[i])});
  for (size_t i = 0; i < example_outputs.size(); ++i)
    blobs.push_back({kExampleOutput, std::to_string(i), contiguous(example_outputs[i])});
  uint64_t offset = 0;
  for (Blob& blob : blobs) {
    blob.offset = offset;
    offset = align_up(offset + uint64_t(blob.data.numel()) * element_size(blob.data.dtype()));
  }
  return blobs;
}

}  // namespace

void save(const CompiledFunction& compiled, const std::string& path, const SaveOptions& options) {
  KILN_CHECK_VALUE(compiled.defined(), "save: the compiled function is empty");
  KILN_CHECK_VALUE(compiled.grad_updates().empty(),
                   "save: this is a compiled training step (it sets gradients); save the model "
                   "instead: kiln.jit.trace(model, x).save(path)");
  std::shared_ptr<Graph> graph = compiled.graph().clone();
  std::vector<std::string> moved = move_large_constants_to_params(*graph);

  std::vector<Tensor> example_outputs;
  if (!options.example_inputs.empty())
    example_outputs = model_format::run_example(compiled, options.example_inputs);
  std::vector<Blob> blobs = collect_blobs(*graph, moved, options.example_inputs, example_outputs);

  Json header = {{"kiln_version", "0.1.0"},
                 {"op_schema_version", kOpSchemaVersion},
                 {"graph", to_text(*graph, {.full = true})},
                 {"num_outputs", compiled.num_outputs()},
                 {"state_updates", Json::array()},
                 {"metadata", options.metadata},
                 {"tensors", Json::array()}};
  for (const StateUpdate& update : compiled.state_updates())
    header["state_updates"].push_back(state_update_record(update));
  for (const Blob& blob : blobs)
    header["tensors"].push_back(tensor_record(blob));
  uint32_t version = format_version_for(*graph);
  if (version >= kSymbolicFormatVersion) header["guards"] = guards_to_json(graph->guards());
  std::string header_text = header.dump();

  Prefix prefix{};
  prefix.magic = kMagic;
  prefix.format_version = version;
  prefix.header_bytes = header_text.size();
  prefix.header_checksum = header_checksum(prefix, header_text);

  io::AtomicFileWriter out(path);
  out.write(&prefix, sizeof prefix);
  out.write(header_text);
  out.pad_to(kAlignment);
  uint64_t data_begin = out.position();
  for (const Blob& blob : blobs) {
    out.pad_to(kAlignment);
    KILN_CHECK(out.position() == data_begin + blob.offset, "save: blob layout mismatch");
    out.write(blob.data.data_ptr(), size_t(blob.data.numel()) * element_size(blob.data.dtype()));
  }
  out.pad_to(kAlignment);
  out.commit();
}

}  // namespace kiln::jit
