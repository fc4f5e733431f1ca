#include "kiln/io/model_format.h"

#include <xxhash.h>

#include <cstdio>

#include "kiln/autograd/autograd.h"
#include "kiln/ops/copy.h"
#include "kiln/util/error.h"

namespace kiln::jit::model_format {

uint64_t checksum(const void* data, size_t size) {
  return XXH3_64bits(data, size);
}

uint64_t header_checksum(const Prefix& prefix, std::string_view header) {
  uint64_t seed = XXH3_64bits(&prefix, kChecksummedPrefixBytes);
  return XXH3_64bits_withSeed(header.data(), header.size(), seed);
}

std::string to_hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

uint32_t format_version_for(const Graph& graph) {
  if (graph.guards().empty() && !first_symbolic(graph)) return kStaticFormatVersion;
  return kSymbolicFormatVersion;
}

namespace {

struct RelationName {
  ShapeGuard::Relation relation;
  std::string_view name;
};
constexpr RelationName kRelationNames[] = {{ShapeGuard::Relation::Eq, "=="},
                                           {ShapeGuard::Relation::Ne, "!="},
                                           {ShapeGuard::Relation::Lt, "<"},
                                           {ShapeGuard::Relation::Le, "<="}};

// A size read from the header, with the parser's message placed.
SizeExpr size_from_json(const io::Json& item, const char* key, const std::string& what) {
  std::string text = io::json_string(io::json_field(item, key, what), what + "." + key);
  try {
    return parse_size_expr(text);
  } catch (const Error& e) {
    throw Error(e.kind(), str(what, ".", key, ": ", e.what()));
  }
}

}  // namespace

io::Json guards_to_json(const std::vector<ShapeGuard>& guards) {
  io::Json list = io::Json::array();
  for (const ShapeGuard& guard : guards) {
    std::string_view relation;
    for (const RelationName& r : kRelationNames)
      if (r.relation == guard.relation) relation = r.name;
    list.push_back({{"lhs", guard.lhs.to_string()},
                    {"relation", relation},
                    {"rhs", guard.rhs.to_string()},
                    {"reason", guard.reason}});
  }
  return list;
}

std::vector<ShapeGuard> guards_from_json(const io::Json& list, const std::string& what) {
  std::vector<ShapeGuard> guards;
  io::json_array(list, what);
  for (size_t i = 0; i < list.size(); ++i) {
    std::string where = str(what, "[", i, "]");
    const io::Json& item = io::json_object(list[i], where);
    ShapeGuard guard;
    guard.lhs = size_from_json(item, "lhs", where);
    guard.rhs = size_from_json(item, "rhs", where);
    std::string relation =
        io::json_string(io::json_field(item, "relation", where), where + ".relation");
    const RelationName* found = nullptr;
    for (const RelationName& r : kRelationNames)
      if (r.name == relation) found = &r;
    KILN_CHECK(found, where, ": unknown relation \"", relation, "\" (expected ==, !=, < or <=)");
    guard.relation = found->relation;
    if (const io::Json* reason = io::json_optional_field(item, "reason", where))
      guard.reason = io::json_string(*reason, where + ".reason");
    guards.push_back(std::move(guard));
  }
  return guards;
}

std::vector<Tensor> run_example(const CompiledFunction& compiled,
                                const std::vector<Tensor>& inputs) {
  NoGradGuard no_grad;
  if (compiled.state_updates().empty()) return compiled.run(inputs);
  std::shared_ptr<Graph> copy = compiled.graph().clone();
  for (Value* param : copy->params())
    param->set_data(clone(param->data()));
  std::vector<Tensor> own_inputs;
  for (const Tensor& input : inputs)
    own_inputs.push_back(clone(input));
  CompiledFunction on_copy(copy, compiled.num_outputs(), compiled.state_updates());
  return on_copy.run(own_inputs);
}

}  // namespace kiln::jit::model_format
