// Dead-code elimination:
//   %y = op(...)   no output of the node used, nor returned, and no effects
//   -> (removed); then constants nobody uses are dropped
//
// Inputs stay (they are the graph's signature) and so do parameters (they
// are the model's state_dict, used or not). A node with several outputs is
// dead only when all of them are unused; nodes with effects (random draws,
// in-place writes) always stay.
#include "kiln/jit/passes/pass_util.h"
#include "kiln/jit/passes/passes.h"

namespace kiln::jit {

bool dce(Graph& graph, PassContext& context) {
  bool changed = false;
  // Users come after their inputs: walking backwards, a chain of dead nodes
  // goes in one sweep.
  std::vector<Node*> nodes = graph.nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    if (!is_dead(**it)) continue;
    context.count_rule("remove dead " + (*it)->op().name);
    graph.erase(*it);
    changed = true;
  }
  for (Value* constant : std::vector<Value*>(graph.constants())) {
    if (is_used(*constant)) continue;
    context.count_rule("remove unused constant");
    graph.remove_unused(constant);
    changed = true;
  }
  return changed;
}

}  // namespace kiln::jit
