// The backward engine: count how many edges reach each node, then run nodes
// whose count dropped to zero (latest-created first), summing the gradients
// that arrive for each of their outputs.
#include <algorithm>
#include <map>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "kiln/autograd/engine.h"
#include "kiln/autograd/hooks.h"
#include "kiln/ops/elementwise.h"
#include "kiln/util/profile_recorder.h"

namespace kiln {
namespace {

struct ByLatest {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr < b->sequence_nr; }
};

// Every node reachable from the roots, with the number of edges into it;
// only nodes in `keep` count when it is given.
std::unordered_map<Node*, int> count_dependencies(const std::vector<Edge>& roots,
                                                  const std::unordered_set<Node*>* keep) {
  std::unordered_map<Node*, int> deps;
  std::vector<Node*> stack;
  std::unordered_set<Node*> seen;
  auto kept = [&](Node* n) { return n && (!keep || keep->count(n)); };
  for (const Edge& e : roots) {
    if (kept(e.node.get()) && seen.insert(e.node.get()).second) stack.push_back(e.node.get());
  }
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const Edge& e : node->next_edges) {
      if (!kept(e.node.get())) continue;
      ++deps[e.node.get()];
      if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
  }
  return deps;
}

// The nodes below the roots from which a gradient can reach one of
// `targets`. grad(inputs=...) needs only these: running the rest would waste
// the work and, without retain_graph, free history that is not its own (the
// part of the graph below an intermediate tensor asked for).
std::unordered_set<Node*> leading_to(const std::vector<Edge>& roots,
                                     const std::unordered_set<Node*>& targets) {
  std::unordered_map<Node*, bool> leads;        // filled as each node's children are done
  std::vector<std::pair<Node*, size_t>> stack;  // a node and its next edge to visit
  for (const Edge& root : roots) {
    if (root.node && !leads.count(root.node.get())) stack.emplace_back(root.node.get(), 0);
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next < node->next_edges.size()) {
        Node* child = node->next_edges[next++].node.get();
        if (child && !leads.count(child)) stack.emplace_back(child, 0);
        continue;
      }
      bool any = targets.count(node) > 0;
      for (const Edge& e : node->next_edges)
        any = any || (e.node && leads.at(e.node.get()));
      leads[node] = any;
      stack.pop_back();
    }
  }
  std::unordered_set<Node*> kept;
  for (const auto& [node, lead] : leads) {
    if (lead) kept.insert(node);
  }
  return kept;
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
  const bool capturing = !captures.empty();
  std::unordered_set<Node*> targets;
  for (const Edge& e : captures)
    targets.insert(e.node.get());
  const std::unordered_set<Node*> needed =
      capturing ? leading_to(roots, targets) : std::unordered_set<Node*>{};
  const std::unordered_set<Node*>* keep = capturing ? &needed : nullptr;
  auto kept = [&](Node* n) { return n && (!keep || keep->count(n)); };
  std::unordered_map<Node*, int> deps = count_dependencies(roots, keep);
  // Keeps every node alive while it waits, keyed by address for the buffers.
  std::unordered_map<Node*, std::shared_ptr<Node>> owners;
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  std::priority_queue<Node*, std::vector<Node*>, ByLatest> ready;
  for (size_t i = 0; i < roots.size(); ++i) {
    Node* n = roots[i].node.get();
    if (!kept(n)) continue;
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

  const bool previous_mode = grad_mode_enabled();
  set_grad_mode(create_graph);
  BackwardCallbacks callbacks;  // what hooks queue with queue_callback
  try {
    while (!ready.empty()) {
      Node* node = ready.top();
      ready.pop();
      std::vector<Tensor> grads = std::move(buffers[node]);
      buffers.erase(node);
      grads.resize(node->num_outputs());
      // Before the capture: grad(inputs=...) returns the hooked gradient.
      run_tensor_hooks(*node, grads);
      for (size_t k = 0; k < grads.size(); ++k) {
        auto it = capture_slots.find({node, int(k)});
        if (it == capture_slots.end()) continue;
        for (size_t idx : it->second)
          captured[idx] = grads[k];
      }
      // grad() never writes .grad; it only reads the captured slots, and
      // runs a node only when a captured slot lies below it.
      bool skip = capturing && (dynamic_cast<AccumulateGrad*>(node) != nullptr ||
                                std::none_of(node->next_edges.begin(), node->next_edges.end(),
                                             [&](const Edge& e) { return kept(e.node.get()); }));
      profiler::Range range;  // the node's gradient ops nest in it
      if (!skip && profiler::recording()) range.open(profiler::EventKind::Op, node->name());
      // Moved in: an accumulator may keep a gradient only this call holds
      // (Note [Keeping the first gradient] in op_node.cpp).
      std::vector<Tensor> input_grads =
          skip ? std::vector<Tensor>{} : node->apply(std::move(grads));
      range.close();
      if (!retain_graph && !skip) node->release();  // a skipped node is not ours to free
      for (size_t i = 0; i < node->next_edges.size(); ++i) {
        const Edge& e = node->next_edges[i];
        if (!kept(e.node.get())) continue;
        Node* next = e.node.get();
        owners.emplace(next, e.node);
        if (i < input_grads.size()) accumulate(buffers[next], size_t(e.input_nr), input_grads[i]);
        if (--deps[next] == 0) ready.push(next);
      }
      owners.erase(node);
    }
    callbacks.finish();
  } catch (...) {
    set_grad_mode(previous_mode);
    throw;
  }
  set_grad_mode(previous_mode);
  return captured;
}

}  // namespace kiln
