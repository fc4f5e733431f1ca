// The backward engine: count how many edges reach each node, then run nodes
// whose count dropped to zero (latest-created first), summing the gradients
// that arrive for each of their outputs.
#include <map>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "kiln/autograd/engine.h"
#include "kiln/ops/elementwise.h"

namespace kiln {
namespace {

struct ByLatest {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr < b->sequence_nr; }
};

// Every node reachable from the roots, with the number of edges into it.
std::unordered_map<Node*, int> count_dependencies(const std::vector<Edge>& roots) {
  std::unordered_map<Node*, int> deps;
  std::vector<Node*> stack;
  std::unordered_set<Node*> seen;
  for (const Edge& e : roots) {
    if (e.node && seen.insert(e.node.get()).second) stack.push_back(e.node.get());
  }
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const Edge& e : node->next_edges) {
      if (!e.node) continue;
      ++deps[e.node.get()];
      if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
  }
  return deps;
}

void accumulate(std::vector<Tensor>& slots, size_t i, const Tensor& grad) {
  if (!grad.defined()) return;
  if (slots.size() <= i) slots.resize(i + 1);
  slots[i] = slots[i].defined() ? slots[i] + grad : grad;
}

}  // namespace

std::vector<Tensor> run_backward(const std::vector<Edge>& roots,
                                 const std::vector<Tensor>& root_grads, bool retain_graph,
                                 bool create_graph, const std::vector<Edge>& captures) {
  std::unordered_map<Node*, int> deps = count_dependencies(roots);
  // Keeps every node alive while it waits, keyed by address for the buffers.
  std::unordered_map<Node*, std::shared_ptr<Node>> owners;
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  std::priority_queue<Node*, std::vector<Node*>, ByLatest> ready;
  for (size_t i = 0; i < roots.size(); ++i) {
    Node* n = roots[i].node.get();
    if (!n) continue;
    owners[n] = roots[i].node;
    accumulate(buffers[n], size_t(roots[i].input_nr), root_grads[i]);
  }
  for (auto& [n, owner] : owners) {
    if (deps[n] == 0) ready.push(n);
  }
  // Gradients asked for by grad(inputs=...): read from the slot they arrive in.
  std::vector<Tensor> captured(captures.size());
  std::map<std::pair<Node*, int>, std::vector<size_t>> capture_slots;
  for (size_t i = 0; i < captures.size(); ++i) {
    capture_slots[{captures[i].node.get(), captures[i].input_nr}].push_back(i);
  }
  const bool capturing = !captures.empty();

  const bool previous_mode = grad_mode_enabled();
  set_grad_mode(create_graph);
  try {
    while (!ready.empty()) {
      Node* node = ready.top();
      ready.pop();
      std::vector<Tensor> grads = std::move(buffers[node]);
      buffers.erase(node);
      grads.resize(node->num_outputs());
      for (size_t k = 0; k < grads.size(); ++k) {
        auto it = capture_slots.find({node, int(k)});
        if (it == capture_slots.end()) continue;
        for (size_t idx : it->second)
          captured[idx] = grads[k];
      }
      // grad() never writes .grad; it only reads the captured slots.
      bool skip = capturing && dynamic_cast<AccumulateGrad*>(node) != nullptr;
      std::vector<Tensor> input_grads = skip ? std::vector<Tensor>{} : node->apply(grads);
      if (!retain_graph) node->release();
      for (size_t i = 0; i < node->next_edges.size(); ++i) {
        const Edge& e = node->next_edges[i];
        if (!e.node) continue;
        Node* next = e.node.get();
        owners.emplace(next, e.node);
        if (i < input_grads.size()) accumulate(buffers[next], size_t(e.input_nr), input_grads[i]);
        if (--deps[next] == 0) ready.push(next);
      }
      owners.erase(node);
    }
  } catch (...) {
    set_grad_mode(previous_mode);
    throw;
  }
  set_grad_mode(previous_mode);
  return captured;
}

}  // namespace kiln
