#include "kiln/jit/compile/control_flow_grad.h"

#include "kiln/autograd/autograd.h"
#include "kiln/autograd/control_flow_grad.h"
#include "kiln/jit/exec/control_flow_exec.h"
#include "kiln/jit/ir/control_flow.h"

namespace kiln::jit {

using Runner = std::shared_ptr<const GraphRunner>;

bool control_flow_has_grad(const Node& node) {
  const std::string& name = node.op().name;
  return name == "cond" || name == "scan" ||
         (name == "while_loop" && node.attrs().get_int("max_iterations") >= 0);
}

std::vector<Tensor> run_control_flow_with_grad(const Node& node, std::span<const Tensor> inputs,
                                               const std::vector<Runner>& blocks) {
  BlockRunner run_block = [&](size_t b, const std::vector<Tensor>& in) {
    return blocks[b]->run_unchecked(in);
  };
  Tensors operands(inputs.begin(), inputs.end());
  if (!control_flow_requires_grad(operands)) return run_control_flow(node, inputs, run_block);
  Tensors results;
  {
    NoGradGuard no_grad;
    results = run_control_flow(node, inputs, run_block);
  }
  ControlFlowGradSpec spec;
  for (const Runner& block : blocks)
    spec.blocks.push_back([block](const Tensors& in) { return block->run_unchecked(in); });
  spec.inputs = std::move(operands);
  const std::string& name = node.op().name;
  if (name == "scan") {
    const ScanLayout layout = scan_layout(node);
    spec.kind = ControlFlowKind::scan;
    spec.num_carry = layout.num_carry;
    spec.num_xs = layout.num_xs;
    spec.reverse = node.attrs().get_bool("reverse");
    spec.length = layout.num_xs ? spec.inputs[layout.num_carry].shape().at(0)
                                : node.attrs().get_int("length");
  } else if (name == "while_loop") {
    spec.kind = ControlFlowKind::while_loop;
    spec.num_carry = size_t(node.attrs().get_int("num_carried"));
    spec.max_iterations = node.attrs().get_int("max_iterations");
  }
  return with_control_flow_history(std::move(spec), results);
}

}  // namespace kiln::jit
