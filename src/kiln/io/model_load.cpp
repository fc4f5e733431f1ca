// Reading .kiln files (layout in model_file.h). Every value read from the
// file is checked before it is used: the checks come in the order the bytes
// are read, so the message names the first thing that is wrong.
#include <cmath>
#include <cstring>
#include <set>

#include "kiln/io/mapped_file.h"
#include "kiln/io/model_file.h"
#include "kiln/io/model_format.h"
#include "kiln/io/tensor_records.h"
#include "kiln/jit/ir/parser.h"
#include "kiln/jit/ir/size_symbols.h"
#include "kiln/jit/ir/specialize.h"
#include "kiln/jit/ir/text_format.h"
#include "kiln/jit/ir/verifier.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/registry.h"

namespace kiln::jit {
namespace {

using io::Json;
using namespace model_format;

Prefix read_prefix(const io::MappedFile& file) {
  const std::string& path = file.path();
  KILN_CHECK(file.size() >= kPrefixBytes, path, ": not a kiln model (", file.size(),
             " bytes, shorter than the ", kPrefixBytes, "-byte prefix)");
  Prefix prefix;
  std::memcpy(&prefix, file.data(), sizeof prefix);
  KILN_CHECK(prefix.magic == kMagic, path, ": not a kiln model (the magic bytes differ)");
  KILN_CHECK(prefix.format_version != 0, path, ": format version 0 is not a valid version");
  KILN_CHECK(prefix.format_version <= kModelFormatVersion, path,
             ": written by a newer kiln in model format version ", prefix.format_version,
             "; this kiln reads format versions up to ", kModelFormatVersion,
             ", so loading it needs a kiln that reads version ", prefix.format_version);
  KILN_CHECK(prefix.reserved == 0, path, ": reserved prefix field is ", prefix.reserved, ", not 0");
  KILN_CHECK(prefix.header_bytes <= file.size() - kPrefixBytes, path, ": the header claims ",
             prefix.header_bytes, " bytes but the file has ", file.size() - kPrefixBytes,
             " after the prefix (truncated?)");
  return prefix;
}

// One tensor record of the header; `offset` made absolute.
struct Record {
  std::string role;
  io::TensorRecord tensor;
  uint64_t checksum = 0;
};

uint64_t parse_hex(const std::string& text, const std::string& what) {
  KILN_CHECK(text.size() == 16 && text.find_first_not_of("0123456789abcdef") == std::string::npos,
             what, ": checksum \"", text, "\" is not 16 lowercase hex digits");
  return std::stoull(text, nullptr, 16);
}

std::vector<Record> read_records(const Json& header, uint64_t data_begin,
                                 const io::MappedFile& file) {
  const std::string& path = file.path();
  const Json& list = io::json_array(io::json_field(header, "tensors", path), path + ": tensors");
  std::vector<Record> records;
  for (size_t i = 0; i < list.size(); ++i) {
    std::string what = str(path, ": tensors[", i, "]");
    const Json& item = io::json_object(list[i], what);
    Record record;
    record.role = io::json_string(io::json_field(item, "role", what), what + ".role");
    record.tensor.name = io::json_string(io::json_field(item, "name", what), what + ".name");
    std::string dtype = io::json_string(io::json_field(item, "dtype", what), what + ".dtype");
    std::optional<DType> parsed = dtype_from_name(dtype);
    KILN_CHECK(parsed, what, ": unknown dtype \"", dtype, "\"");
    record.tensor.dtype = *parsed;
    record.tensor.shape = io::json_shape(io::json_field(item, "shape", what), what + ".shape");
    uint64_t offset = io::json_uint(io::json_field(item, "offset", what), what + ".offset");
    KILN_CHECK(offset <= file.size() - data_begin, what, ": offset ", offset,
               " lies past the end of the file");
    record.tensor.offset = data_begin + offset;
    record.tensor.nbytes = io::json_uint(io::json_field(item, "nbytes", what), what + ".nbytes");
    record.checksum =
        parse_hex(io::json_string(io::json_field(item, "xxh3", what), what + ".xxh3"), what);
    records.push_back(std::move(record));
  }
  std::vector<io::TensorRecord> layout;
  for (const Record& record : records)
    layout.push_back(record.tensor);
  io::check_layout(layout, data_begin, file.size(), kAlignment, path);
  for (const Record& record : records) {
    std::string_view bytes = file.bytes(record.tensor.offset, record.tensor.nbytes);
    KILN_CHECK(checksum(bytes.data(), bytes.size()) == record.checksum, path, ": tensor '",
               record.tensor.name, "' (", record.role, ") fails its checksum (corrupted?)");
  }
  return records;
}

// Runs `fn`, prefixing the message of a kiln::Error it throws with `context`.
template <typename Fn>
auto in_context(const std::string& context, Fn&& fn) {
  try {
    return fn();
  } catch (const Error& e) {
    throw Error(e.kind(), context + ": " + e.what());
  }
}

std::vector<StateUpdate> read_state_updates(const Json& header, const std::string& path) {
  std::vector<StateUpdate> updates;
  const Json& list =
      io::json_array(io::json_field(header, "state_updates", path), path + ": state_updates");
  for (size_t i = 0; i < list.size(); ++i) {
    std::string what = str(path, ": state_updates[", i, "]");
    StateUpdate update;
    update.output = io::json_uint(io::json_field(list[i], "output", what), what + ".output");
    if (const Json* param = io::json_optional_field(list[i], "param", what)) {
      update.target = ValueKind::Param;
      update.param = io::json_string(*param, what + ".param");
    } else {
      update.target = ValueKind::Input;
      update.input = io::json_uint(io::json_field(list[i], "input", what), what + ".input");
    }
    updates.push_back(std::move(update));
  }
  return updates;
}

std::map<std::string, std::string> read_metadata(const Json& header, const std::string& path) {
  std::map<std::string, std::string> metadata;
  const Json* field = io::json_optional_field(header, "metadata", path);
  if (!field) return metadata;
  for (const auto& [key, value] : io::json_object(*field, path + ": metadata").items())
    metadata[key] = io::json_string(value, path + ": metadata." + key);
  return metadata;
}

// Binds each parameter of the graph to its tensor in the file, and turns
// the parameters the file marks as constants back into constants.
void bind_weights(ModelFile& model, const std::vector<Record>& records, io::MappedFile& file) {
  Graph& graph = *model.graph;
  std::set<std::string> bound;
  std::vector<std::pair<Value*, Tensor>> constants;
  for (const Record& record : records) {
    if (record.role != kParam && record.role != kConstant) continue;
    const io::TensorRecord& tensor = record.tensor;
    Value* param = graph.find_param(tensor.name);
    KILN_CHECK(param, model.path, ": tensor '", tensor.name, "' is not a parameter of the graph");
    KILN_CHECK(bound.insert(tensor.name).second, model.path, ": parameter '", tensor.name,
               "' has two tensors");
    KILN_CHECK(param->dtype() == tensor.dtype && same_dims(param->shape(), to_dims(tensor.shape)),
               model.path, ": parameter '", tensor.name, "' is ", param->dtype(), param->shape(),
               " in the graph but ", tensor.dtype, tensor.shape, " in the file");
    Tensor data = file.tensor(tensor.offset, tensor.shape, tensor.dtype);
    model.weight_bytes += tensor.nbytes;
    if (record.role == kConstant) {
      constants.emplace_back(param, std::move(data));
      continue;
    }
    param->set_data(std::move(data));
  }
  for (const Value* param : graph.params()) {
    KILN_CHECK(bound.count(param->name()), model.path, ": parameter '", param->name(),
               "' has no tensor in the file");
  }
  for (auto& [param, data] : constants) {
    param->replace_all_uses_with(graph.add_constant(std::move(data)));
    graph.remove_unused(param);
  }
}

std::vector<Tensor> read_examples(const std::vector<Record>& records, std::string_view role,
                                  io::MappedFile& file) {
  std::vector<Tensor> examples;
  for (const Record& record : records) {
    if (record.role != role) continue;
    const io::TensorRecord& tensor = record.tensor;
    KILN_CHECK(tensor.name == std::to_string(examples.size()), file.path(), ": ", role, " '",
               tensor.name, "' is out of order");
    examples.push_back(file.tensor(tensor.offset, tensor.shape, tensor.dtype));
  }
  return examples;
}

void check_roles(const std::vector<Record>& records, const std::string& path) {
  for (const Record& record : records) {
    bool known = record.role == kParam || record.role == kConstant ||
                 record.role == kExampleInput || record.role == kExampleOutput;
    KILN_CHECK(known, path, ": tensor '", record.tensor.name, "' has an unknown role \"",
               record.role, "\"");
  }
}

void check_outputs(const ModelFile& model) {
  const Graph& graph = *model.graph;
  KILN_CHECK(model.num_outputs + model.state_updates.size() == graph.outputs().size(), model.path,
             ": ", model.num_outputs, " outputs and ", model.state_updates.size(),
             " state updates, but the graph returns ", graph.outputs().size(), " values");
  for (const StateUpdate& update : model.state_updates) {
    KILN_CHECK(update.output >= model.num_outputs && update.output < graph.outputs().size(),
               model.path, ": a state update writes graph output ", update.output,
               ", which is not a state output");
    const Value* target = update.target == ValueKind::Param      ? graph.find_param(update.param)
                          : update.input < graph.inputs().size() ? graph.inputs()[update.input]
                                                                 : nullptr;
    KILN_CHECK(target, model.path, ": a state update names no input or parameter of the graph");
    const Value* value = graph.outputs()[update.output];
    KILN_CHECK(target->dtype() == value->dtype() && same_dims(target->shape(), value->shape()),
               model.path, ": a state update writes ", value->dtype(), value->shape(), " into ",
               target->dtype(), target->shape());
  }
}

void check_example(const ModelFile& model) {
  const Graph& graph = *model.graph;
  if (model.example_inputs.empty() && model.example_outputs.empty()) return;
  KILN_CHECK(model.example_inputs.size() == graph.inputs().size() &&
                 model.example_outputs.size() == model.num_outputs,
             model.path, ": the example has ", model.example_inputs.size(), " inputs and ",
             model.example_outputs.size(), " outputs; the graph takes ", graph.inputs().size(),
             " and returns ", model.num_outputs);
  bool symbolic = graph.is_symbolic();
  for (size_t i = 0; i < model.example_inputs.size(); ++i) {
    const Tensor& example = model.example_inputs[i];
    const Value* input = graph.inputs()[i];
    bool fits = example.dtype() == input->dtype() &&
                (symbolic || same_dims(to_dims(example.shape()), input->shape()));
    KILN_CHECK(fits, model.path, ": example input ", i, " is ", example.dtype(), example.shape(),
               " but the graph takes ", input->dtype(), input->shape());
  }
  if (!symbolic) return;
  // The example of a symbolic graph is one set of sizes it runs at.
  std::vector<IntList> shapes;
  for (const Tensor& example : model.example_inputs)
    shapes.push_back(example.shape());
  in_context(model.path + ": the stored example", [&] { bind_symbols(graph, shapes); });
}

// The symbols a size attribute mentions.
std::vector<std::string> attr_symbols(const AttrValue& value) {
  if (const Dim* dim = std::get_if<Dim>(&value)) return symbols_of({*dim});
  if (const DimList* dims = std::get_if<DimList>(&value)) return symbols_of(*dims);
  return {};
}

// Version 1 holds static graphs only; a file that says 1 and has symbolic
// sizes was not written by kiln.
void check_static_for_version_1(const ModelFile& model) {
  if (model.format_version >= kSymbolicFormatVersion) return;
  std::optional<SymbolicSite> site = first_symbolic(*model.graph);
  if (!site) return;
  if (site->value) {
    KILN_CHECK(false, model.path, ": graph value %", site->value->id(), " has the symbolic shape ",
               to_string(site->value->shape()),
               ", which format version 1 cannot hold (symbolic graphs are written in version ",
               kSymbolicFormatVersion, ")");
  }
  KILN_CHECK(false, model.path, ": attribute '", site->attr, "' of ", site->node->op().name,
             " is symbolic, which format version 1 cannot hold (symbolic graphs are written in "
             "version ",
             kSymbolicFormatVersion, ")");
}

// A call binds each symbol from an input dim that is that symbol alone
// (specialize.h): one that no input sets could never be given a value.
void check_symbols_are_bound(const ModelFile& model) {
  const Graph& graph = *model.graph;
  std::set<std::string> bound;
  for (const Value* input : graph.inputs()) {
    for (const Dim& dim : input->shape()) {
      if (std::string name = lone_symbol(dim); !name.empty()) bound.insert(name);
    }
  }
  auto check = [&](const std::vector<std::string>& names, const std::string& where) {
    for (const std::string& name : names) {
      KILN_CHECK(bound.count(name), model.path, ": ", where, " uses the size ", name,
                 ", but no graph input has a dim that is ", name, " alone, so no call sets it");
    }
  };
  for (const Value* input : graph.inputs())
    check(symbols_of(input->shape()), str("graph input %", input->id()));
  for (const Node* node : graph.nodes()) {
    // Or one a node binds when it runs (nonzero's count, jit/ir/size_symbols.h).
    if (std::string name = bound_symbol(*node); !name.empty()) bound.insert(name);
    for (const Value* output : node->outputs())
      check(symbols_of(output->shape()), str("graph value %", output->id()));
    for (const auto& [name, value] : node->attrs().items())
      check(attr_symbols(value), str("attribute '", name, "' of ", node->op().name));
  }
  for (const ShapeGuard& guard : graph.guards()) {
    std::vector<std::string> names = guard.lhs.symbols();
    for (std::string& name : guard.rhs.symbols())
      names.push_back(std::move(name));
    check(names, "the guard " + guard.to_string());
  }
}

// Every value's size must be countable: later code multiplies dimensions
// without checking for overflow. A symbolic dim is sized at each call (by
// shape inference over the call's sizes); its static dims are checked here.
void check_value_sizes(const ModelFile& model) {
  auto check = [&](const Value* value) {
    IntList known;
    for (const Dim& dim : value->shape())
      known.push_back(dim.is_static() ? dim.static_value() : 1);
    io::checked_nbytes(value->dtype(), known, model.path + ": graph value");
  };
  for (const Value* input : model.graph->inputs())
    check(input);
  for (const Node* node : model.graph->nodes())
    for (const Value* output : node->outputs())
      check(output);
}

// The guards the header keeps (version 2), added to the graph before it is
// verified: re-inferring a symbolic graph decides as the trace did.
void read_guards(ModelFile& model, const Json& header) {
  const Json* list = io::json_optional_field(header, "guards", model.path);
  if (!list) return;
  KILN_CHECK(model.format_version >= kSymbolicFormatVersion, model.path,
             ": format version 1 has no guards (symbolic graphs are written in version ",
             kSymbolicFormatVersion, ")");
  for (ShapeGuard& guard : guards_from_json(*list, model.path + ": guards"))
    model.graph->add_guard(std::move(guard));
}

}  // namespace

ModelFile read_model_file(const std::string& path) {
  std::shared_ptr<io::MappedFile> file = io::MappedFile::open(path);
  Prefix prefix = read_prefix(*file);
  std::string_view header_text = file->bytes(kPrefixBytes, prefix.header_bytes);
  KILN_CHECK(header_checksum(prefix, header_text) == prefix.header_checksum, path,
             ": the header fails its checksum (corrupted?)");
  Json header = io::parse_json_header(header_text, path);
  io::json_object(header, path + ": header");

  ModelFile model;
  model.path = path;
  model.file_bytes = file->size();
  model.format_version = prefix.format_version;
  model.kiln_version = io::json_string(io::json_field(header, "kiln_version", path), path);
  uint64_t schema = io::json_uint(io::json_field(header, "op_schema_version", path), path);
  KILN_CHECK(schema <= uint64_t(kOpSchemaVersion), path, ": written against op schema version ",
             schema, " (kiln ", model.kiln_version, "); this kiln has version ", kOpSchemaVersion,
             ", so loading it needs a kiln with op schema version ", schema);
  model.op_schema_version = int(schema);

  uint64_t data_begin = align_up(kPrefixBytes + prefix.header_bytes);
  KILN_CHECK(data_begin <= file->size(), path, ": the file ends inside the header's padding");
  std::vector<Record> records = read_records(header, data_begin, *file);
  check_roles(records, path);

  std::string graph_text = io::json_string(io::json_field(header, "graph", path), path + ": graph");
  model.graph =
      in_context(path + ": graph", [&] { return std::shared_ptr<Graph>(parse_graph(graph_text)); });
  read_guards(model, header);
  check_static_for_version_1(model);
  bind_weights(model, records, *file);
  check_symbols_are_bound(model);
  in_context(path + ": graph", [&] { verify(*model.graph); });
  check_value_sizes(model);

  model.num_outputs = io::json_uint(io::json_field(header, "num_outputs", path), path);
  model.state_updates = read_state_updates(header, path);
  check_outputs(model);
  model.metadata = read_metadata(header, path);
  model.example_inputs = read_examples(records, kExampleInput, *file);
  model.example_outputs = read_examples(records, kExampleOutput, *file);
  check_example(model);
  return model;
}

namespace {

bool outputs_match(const Tensor& got, const Tensor& expected) {
  if (got.dtype() != expected.dtype() || got.shape() != expected.shape()) return false;
  std::vector<double> a = got.to_vector<double>();
  std::vector<double> b = expected.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (!(std::abs(a[i] - b[i]) <= 1e-5 + 1e-4 * std::abs(b[i]))) return false;
  }
  return true;
}

}  // namespace

CompiledFunction compile(const ModelFile& file, const LoadOptions& options) {
  CompiledFunction compiled(file.graph, file.num_outputs, file.state_updates);
  if (!options.verify) return compiled;
  KILN_CHECK(!file.example_inputs.empty() || file.graph->inputs().empty(), file.path,
             ": verify asked for, but the file was saved without an example");
  std::vector<Tensor> outputs = model_format::run_example(compiled, file.example_inputs);
  for (size_t i = 0; i < outputs.size(); ++i) {
    KILN_CHECK(outputs_match(outputs[i], file.example_outputs.at(i)), file.path, ": output ", i,
               " of the saved example differs from what the loaded model computes (",
               outputs[i].dtype(), outputs[i].shape(), ")");
  }
  return compiled;
}

CompiledFunction load(const std::string& path, const LoadOptions& options) {
  return compile(read_model_file(path), options);
}

}  // namespace kiln::jit
