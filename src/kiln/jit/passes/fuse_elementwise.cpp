// Elementwise fusion:
//   %a = sigmoid(%x)
//   %b = mul(%a, %c)      ->   %d = fused_elementwise(%x, %c) {program="sigmoid(%0) mul($0, %1)
//   neg($1)"} %d = neg(%b)
// A group is a tree of elementwise ops (no attributes, one floating dtype,
// every result of the output's shape) whose inner results each have exactly
// one reader, inside the group. The fused op runs the same kernels block by
// block (ops/fused_elementwise.cpp): inputs read once, the output written
// once, the same bits, so this pass keeps eager's rounding.
#include <algorithm>
#include <set>
#include <unordered_map>

#include "kiln/jit/passes/pass_util.h"
#include "kiln/jit/passes/passes.h"
#include "kiln/ops/registry.h"

namespace kiln::jit {
namespace {

// One element for every value of the size symbols (a broadcast scalar).
bool is_single_element(const DimList& shape) {
  const Dim n = numel_of(shape);
  return n.is_static() && n.static_value() == 1;
}

// Whether `node` may join a group computing values of `type`. Its inputs
// are read where the fused node stands (the group's last member), so none
// may be memory that something writes in place in between.
bool fusable(const Node& node, const TensorMeta& type, const WrittenMemory& written) {
  const OpDef& def = node.op();
  if (def.kind != OpKind::Elementwise || !def.attrs.empty() || def.num_outputs != 1 || !def.cpu ||
      has_effects(node)) {
    return false;
  }
  const Value& out = *node.output();
  if (!is_floating(out.dtype()) || out.dtype() != type.dtype ||
      !same_dims(out.shape(), type.shape)) {
    return false;
  }
  return std::all_of(node.inputs().begin(), node.inputs().end(), [&](const Value* in) {
    return in && in->dtype() == type.dtype &&
           (same_dims(in->shape(), type.shape) || is_single_element(in->shape())) &&
           !written.aliases(*in);
  });
}

// The only reader of `value`, when it has exactly one and is not returned.
Node* only_reader(const Value& value) {
  if (value.uses().size() != 1 || value.graph().output_uses(&value) != 0) return nullptr;
  return value.uses()[0].user;
}

// Grows a group from `root` down its chain of only readers, then up through
// inputs that only the group reads.
std::vector<Node*> group_from(Node* root, const std::set<const Node*>& taken,
                              const WrittenMemory& written) {
  const TensorMeta type = root->output()->type();
  std::vector<Node*> members{root};
  Node* last = root;
  while (Node* next = only_reader(*last->output())) {
    if (taken.count(next) || !fusable(*next, type, written)) break;
    members.push_back(next);
    last = next;
  }
  for (size_t i = 0; i < members.size(); ++i) {
    for (Value* in : members[i]->inputs()) {
      Node* producer = in->producer();
      if (!producer || taken.count(producer) || only_reader(*in) != members[i]) continue;
      if (std::find(members.begin(), members.end(), producer) != members.end()) continue;
      if (fusable(*producer, type, written)) members.push_back(producer);
    }
  }
  return members;
}

void replace_group(Graph& graph, std::vector<Node*> members,
                   const std::unordered_map<const Node*, size_t>& position) {
  std::sort(members.begin(), members.end(),
            [&](const Node* a, const Node* b) { return position.at(a) < position.at(b); });
  std::vector<Value*> inputs;
  std::unordered_map<const Value*, size_t> result_of;  // a member's output -> its instruction
  std::string program;
  for (size_t j = 0; j < members.size(); ++j) {
    const Node& node = *members[j];
    program += (j ? " " : "") + node.op().name + "(";
    for (size_t k = 0; k < node.inputs().size(); ++k) {
      Value* in = node.input(k);
      std::string operand;
      if (auto r = result_of.find(in); r != result_of.end()) {
        operand = "$" + std::to_string(r->second);
      } else {
        auto known = std::find(inputs.begin(), inputs.end(), in);
        if (known == inputs.end()) known = inputs.insert(inputs.end(), in);
        operand = "%" + std::to_string(known - inputs.begin());
      }
      program += (k ? ", " : "") + operand;
    }
    program += ")";
    result_of[node.output()] = j;
  }
  static const OpDef& fused_op = op("fused_elementwise");
  Node* last = members.back();
  Node* fused = graph.insert_before(last, fused_op, inputs, {{"program", program}});
  last->output()->replace_all_uses_with(fused->output());
  for (auto it = members.rbegin(); it != members.rend(); ++it)
    graph.erase(*it);
}

}  // namespace

bool fuse_elementwise(Graph& graph, PassContext& context) {
  std::vector<Node*> nodes = graph.nodes();
  std::unordered_map<const Node*, size_t> position;
  for (size_t i = 0; i < nodes.size(); ++i)
    position[nodes[i]] = i;
  const WrittenMemory written(graph);
  std::set<const Node*> taken;
  std::vector<std::vector<Node*>> groups;
  for (Node* node : nodes) {
    if (taken.count(node) || !fusable(*node, node->output()->type(), written)) continue;
    std::vector<Node*> members = group_from(node, taken, written);
    if (members.size() < 2) continue;
    taken.insert(members.begin(), members.end());
    groups.push_back(std::move(members));
  }
  for (std::vector<Node*>& members : groups) {
    context.count_rule("fuse " + std::to_string(members.size()) + " elementwise ops");
    replace_group(graph, std::move(members), position);
  }
  return !groups.empty();
}

}  // namespace kiln::jit
