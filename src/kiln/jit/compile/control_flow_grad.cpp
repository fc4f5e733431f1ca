#include "kiln/jit/compile/control_flow_grad.h"

#include "kiln/autograd/node.h"
#include "kiln/core/factory.h"
#include "kiln/jit/exec/control_flow_exec.h"
#include "kiln/jit/ir/control_flow.h"
#include "kiln/ops/control_flow.h"
#include "kiln/ops/elementwise.h"

namespace kiln::jit {
namespace {

using Runner = std::shared_ptr<const GraphRunner>;

Tensors slice(const Tensors& all, size_t begin, size_t count) {
  return Tensors(all.begin() + std::ptrdiff_t(begin), all.begin() + std::ptrdiff_t(begin + count));
}

std::vector<size_t> floating_of(std::span<const Tensor> tensors, size_t begin, size_t count) {
  std::vector<size_t> picked;
  for (size_t i = begin; i < begin + count; ++i) {
    if (is_floating(tensors[i].dtype())) picked.push_back(i);
  }
  return picked;
}

// d(outputs[outs]) / d(inputs[ins]) of `block` at `inputs`, given the
// outputs' gradients: one gradient per entry of `ins` (zeros where none).
Tensors vjp(const GraphRunner& block, const Tensors& inputs, const std::vector<size_t>& ins,
            const std::vector<size_t>& outs, const Tensors& grad_outs) {
  EnableGradGuard grad_on;
  Tensors leaves = inputs;
  Tensors wrt;
  for (size_t i : ins) {
    leaves[i] = detach(inputs[i]);
    requires_grad_(leaves[i]);
    wrt.push_back(leaves[i]);
  }
  Tensors results = block.run_unchecked(leaves);
  Tensors roots, seeds;
  for (size_t k = 0; k < outs.size(); ++k) {
    if (!results[outs[k]].requires_grad()) continue;  // does not depend on `wrt`
    roots.push_back(results[outs[k]]);
    seeds.push_back(grad_outs[k]);
  }
  Tensors grads = roots.empty() ? Tensors(wrt.size()) : grad(roots, wrt, seeds, false, false, true);
  for (size_t k = 0; k < grads.size(); ++k) {
    if (!grads[k].defined()) grads[k] = zeros_like(wrt[k]);
  }
  return grads;
}

class ControlFlowBackward final : public kiln::Node {
 public:
  ControlFlowBackward(const jit::Node& node, std::vector<Runner> blocks, Tensors inputs,
                      std::vector<TensorMeta> outputs)
      : op_(node.op().name),
        attrs_(node.attrs()),
        layout_(op_ == "scan" ? scan_layout(node) : ScanLayout{}),
        blocks_(std::move(blocks)),
        inputs_(std::move(inputs)),
        outputs_(std::move(outputs)) {}

  std::vector<Tensor> apply(std::vector<Tensor> grad_outputs) override {
    for (size_t i = 0; i < grad_outputs.size(); ++i) {
      if (grad_outputs[i].defined() || !is_floating(outputs_[i].dtype)) continue;
      grad_outputs[i] = zeros(to_static(outputs_[i].shape, op_), outputs_[i].dtype);
    }
    return op_ == "cond" ? apply_cond(grad_outputs) : apply_scan(grad_outputs);
  }
  std::string name() const override { return op_ == "cond" ? "CondBackward" : "ScanBackward"; }
  size_t num_outputs() const override { return outputs_.size(); }
  void release() override { inputs_.clear(); }

 private:
  // A cond over the branches' vjps: each gives one gradient per floating operand.
  Tensors apply_cond(const Tensors& grad_outputs) {
    const Tensors operands = slice(inputs_, 1, inputs_.size() - 1);
    const std::vector<size_t> ins = floating_of(operands, 0, operands.size());
    std::vector<size_t> outs;
    Tensors seeds;
    for (size_t i = 0; i < outputs_.size(); ++i) {
      if (!is_floating(outputs_[i].dtype)) continue;
      outs.push_back(i);
      seeds.push_back(grad_outputs[i]);
    }
    auto branch_vjp = [&](const Runner& block) {
      return [&, block](const Tensors& args) {
        return vjp(*block, slice(args, 0, operands.size()), ins, outs,
                   slice(args, operands.size(), seeds.size()));
      };
    };
    Tensors args = operands;
    args.insert(args.end(), seeds.begin(), seeds.end());
    Tensors grads =
        kiln::cond(inputs_[0], branch_vjp(blocks_[0]), branch_vjp(blocks_[1]), args, {});
    Tensors per_input(inputs_.size());
    for (size_t k = 0; k < ins.size(); ++k)
      per_input[1 + ins[k]] = grads[k];
    return per_input;
  }

  // A forward scan that also returns each step's incoming carry, then a
  // reverse scan of the step's vjp over those carries.
  Tensors apply_scan(const Tensors& grad_outputs) {
    const size_t n = layout_.num_carry, k = layout_.num_xs, m = layout_.num_captures;
    const size_t p = layout_.num_ys;
    const bool reverse = attrs_.get_bool("reverse");
    const GraphRunner& step = *blocks_[0];
    const Tensors init = slice(inputs_, 0, n), xs = slice(inputs_, n, k);
    const Tensors captures = slice(inputs_, n + k, m);
    std::optional<int64_t> length;
    if (k == 0) length = attrs_.get_int("length");
    ScanResult forward;
    {
      NoGradGuard no_grad;
      forward = kiln::scan(
          [&](const Tensors& carry, const Tensors& x) {
            Tensors in = carry;
            in.insert(in.end(), x.begin(), x.end());
            in.insert(in.end(), captures.begin(), captures.end());
            return std::make_pair(slice(step.run_unchecked(in), 0, n), carry);
          },
          init, xs, reverse, length, {});
    }
    // Step inputs: carry (n), x (k), captures (m); outputs: carry (n), ys (p).
    Tensors step_inputs = init;
    step_inputs.insert(step_inputs.end(), xs.begin(), xs.end());
    step_inputs.insert(step_inputs.end(), captures.begin(), captures.end());
    std::vector<size_t> fc = floating_of(step_inputs, 0, n);
    std::vector<size_t> fx_all = floating_of(inputs_, n, k);
    std::vector<size_t> fcap = floating_of(step_inputs, n + k, m);
    std::vector<size_t> outs = fc;  // the carry's outputs are at the carry's positions
    for (size_t j = 0; j < p; ++j) {
      if (is_floating(outputs_[n + j].dtype)) outs.push_back(n + j);
    }
    std::vector<size_t> ins = fc;
    for (size_t i : fx_all)
      ins.push_back(i);
    ins.insert(ins.end(), fcap.begin(), fcap.end());
    // Backward carry: d(carry) for the floating carries, then the captures'
    // accumulated gradients; backward xs: carries, xs, d(ys) per step.
    Tensors carry_b;
    for (size_t i : fc)
      carry_b.push_back(grad_outputs[i]);
    for (size_t i : fcap)
      carry_b.push_back(zeros_like(step_inputs[i]));
    Tensors xs_b = forward.ys;
    xs_b.insert(xs_b.end(), xs.begin(), xs.end());
    for (size_t j = 0; j < p; ++j) {
      if (is_floating(outputs_[n + j].dtype)) xs_b.push_back(grad_outputs[n + j]);
    }
    ScanResult backward = kiln::scan(
        [&](const Tensors& carry, const Tensors& x) {
          Tensors in = slice(x, 0, n + k);
          in.insert(in.end(), captures.begin(), captures.end());
          Tensors seeds = slice(carry, 0, fc.size());
          Tensors dys = slice(x, n + k, x.size() - n - k);
          seeds.insert(seeds.end(), dys.begin(), dys.end());
          Tensors grads = vjp(step, in, ins, outs, seeds);
          Tensors next = slice(grads, 0, fc.size());
          for (size_t c = 0; c < fcap.size(); ++c)
            next.push_back(add(carry[fc.size() + c], grads[fc.size() + fx_all.size() + c]));
          return std::make_pair(std::move(next), slice(grads, fc.size(), fx_all.size()));
        },
        carry_b, xs_b, !reverse, length, {});
    Tensors per_input(inputs_.size());
    for (size_t c = 0; c < fc.size(); ++c)
      per_input[fc[c]] = backward.carry[c];
    for (size_t c = 0; c < fx_all.size(); ++c)
      per_input[fx_all[c]] = backward.ys.at(c);
    for (size_t c = 0; c < fcap.size(); ++c)
      per_input[fcap[c]] = backward.carry[fc.size() + c];
    return per_input;
  }

  std::string op_;
  Attrs attrs_;
  ScanLayout layout_;
  std::vector<Runner> blocks_;
  Tensors inputs_;
  std::vector<TensorMeta> outputs_;
};

}  // namespace

bool control_flow_has_grad(const Node& node) {
  return node.op().name == "cond" || node.op().name == "scan";
}

std::vector<Tensor> run_control_flow_with_grad(const Node& node, std::span<const Tensor> inputs,
                                               const std::vector<Runner>& blocks) {
  BlockRunner run_block = [&](size_t b, const std::vector<Tensor>& in) {
    return blocks[b]->run_unchecked(in);
  };
  bool needs_grad = grad_mode_enabled() && std::any_of(inputs.begin(), inputs.end(), [](auto& t) {
                      return t.defined() && t.requires_grad();
                    });
  if (!needs_grad) return run_control_flow(node, inputs, run_block);
  KILN_CHECK(control_flow_has_grad(node), node.op().name,
             ": gradients through a compiled while_loop are not supported yet; use fori_loop "
             "with static bounds or scan, or run the loop eagerly");
  Tensors results;
  {
    NoGradGuard no_grad;
    results = run_control_flow(node, inputs, run_block);
  }
  std::vector<TensorMeta> metas;
  for (const Value* out : node.outputs()) {
    TensorMeta meta = out->type();
    meta.shape = to_dims(results[metas.size()].shape());
    metas.push_back(std::move(meta));
  }
  auto backward = std::make_shared<ControlFlowBackward>(
      node, blocks, Tensors(inputs.begin(), inputs.end()), std::move(metas));
  for (const Tensor& t : inputs)
    backward->next_edges.push_back(gradient_edge(t));
  for (size_t i = 0; i < results.size(); ++i) {
    if (is_floating(results[i].dtype())) set_history(results[i], backward, int(i));
  }
  return results;
}

}  // namespace kiln::jit
