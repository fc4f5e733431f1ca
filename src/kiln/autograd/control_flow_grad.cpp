#include "kiln/autograd/control_flow_grad.h"

#include <algorithm>

#include "kiln/autograd/node.h"
#include "kiln/core/factory.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/view.h"

namespace kiln {
namespace {

Tensors slice(const Tensors& all, size_t begin, size_t count) {
  return Tensors(all.begin() + std::ptrdiff_t(begin), all.begin() + std::ptrdiff_t(begin + count));
}

Tensors concat(Tensors a, const Tensors& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<size_t> floating_of(const Tensors& tensors, size_t begin, size_t count) {
  std::vector<size_t> picked;
  for (size_t i = begin; i < begin + count; ++i) {
    if (is_floating(tensors[i].dtype())) picked.push_back(i);
  }
  return picked;
}

std::string at(const std::string& site) {
  return site.empty() ? "" : " (at " + site + ")";
}

// d(fn(inputs)[outs]) / d(inputs[ins]), given the gradients of those
// outputs: one gradient per entry of `ins` (zeros where none arrives).
Tensors vjp(const TensorsFn& fn, const Tensors& inputs, const std::vector<size_t>& ins,
            const std::vector<size_t>& outs, const Tensors& seeds) {
  EnableGradGuard grad_on;
  Tensors leaves = inputs;
  Tensors wrt;
  for (size_t i : ins) {
    leaves[i] = detach(inputs[i]);
    requires_grad_(leaves[i]);
    wrt.push_back(leaves[i]);
  }
  Tensors results = fn(leaves);
  Tensors roots, root_grads;
  for (size_t k = 0; k < outs.size(); ++k) {
    if (!results[outs[k]].requires_grad()) continue;  // does not depend on `wrt`
    roots.push_back(results[outs[k]]);
    root_grads.push_back(seeds[k]);
  }
  Tensors grads =
      roots.empty() ? Tensors(wrt.size()) : grad(roots, wrt, root_grads, false, false, true);
  for (size_t k = 0; k < grads.size(); ++k) {
    if (!grads[k].defined()) grads[k] = zeros_like(wrt[k]);
  }
  return grads;
}

struct OutputMeta {
  IntList shape;
  DType dtype;
};

class ControlFlowBackward final : public Node {
 public:
  ControlFlowBackward(ControlFlowGradSpec spec, std::vector<OutputMeta> outputs)
      : spec_(std::move(spec)), outputs_(std::move(outputs)) {}

  std::vector<Tensor> apply(std::vector<Tensor> grad_outputs) override {
    for (size_t i = 0; i < grad_outputs.size(); ++i) {
      if (grad_outputs[i].defined() || !is_floating(outputs_[i].dtype)) continue;
      grad_outputs[i] = zeros(outputs_[i].shape, outputs_[i].dtype);
    }
    switch (spec_.kind) {
      case ControlFlowKind::cond:
        return apply_cond(grad_outputs);
      case ControlFlowKind::scan:
        return apply_scan(grad_outputs);
      case ControlFlowKind::while_loop:
        return apply_while(grad_outputs);
    }
    return {};
  }
  std::string name() const override {
    switch (spec_.kind) {
      case ControlFlowKind::cond:
        return "CondBackward";
      case ControlFlowKind::scan:
        return "ScanBackward";
      case ControlFlowKind::while_loop:
        return "WhileLoopBackward";
    }
    return "";
  }
  size_t num_outputs() const override { return outputs_.size(); }
  void release() override {
    spec_.blocks.clear();
    spec_.inputs.clear();
  }

 private:
  // One gradient per input (the node's edges): grads[k] for input ins[k].
  Tensors per_input(const std::vector<size_t>& ins, const Tensors& grads) const {
    Tensors out(spec_.inputs.size());
    for (size_t k = 0; k < ins.size(); ++k)
      out[ins[k]] = grads[k];
    return out;
  }

  // A cond over the branches' vjps: one gradient per floating operand.
  Tensors apply_cond(const Tensors& grad_outputs) {
    const Tensors& inputs = spec_.inputs;
    const Tensors operands = slice(inputs, 1, inputs.size() - 1);
    const std::vector<size_t> ins = floating_of(operands, 0, operands.size());
    std::vector<size_t> outs;
    Tensors seeds;
    for (size_t i = 0; i < outputs_.size(); ++i) {
      if (!is_floating(outputs_[i].dtype)) continue;
      outs.push_back(i);
      seeds.push_back(grad_outputs[i]);
    }
    auto branch_vjp = [&](const TensorsFn& branch) {
      return [&, branch](const Tensors& args) {
        return vjp(branch, slice(args, 0, operands.size()), ins, outs,
                   slice(args, operands.size(), seeds.size()));
      };
    };
    Tensors grads = kiln::cond(inputs[0], branch_vjp(spec_.blocks[0]), branch_vjp(spec_.blocks[1]),
                               concat(operands, seeds), {});
    std::vector<size_t> shifted;
    for (size_t i : ins)
      shifted.push_back(1 + i);
    return per_input(shifted, grads);
  }

  // A forward scan that also returns each step's incoming carry, then a
  // reverse scan of the step's vjp over those carries. The backward carry
  // holds d(carry) for the floating carries, then the gradients of the
  // extra inputs summed over the steps so far.
  Tensors apply_scan(const Tensors& grad_outputs) {
    const size_t n = spec_.num_carry, k = spec_.num_xs;
    const size_t m = spec_.inputs.size() - n - k, p = outputs_.size() - n;
    const TensorsFn& step = spec_.blocks[0];
    const Tensors init = slice(spec_.inputs, 0, n), xs = slice(spec_.inputs, n, k);
    const Tensors extra = slice(spec_.inputs, n + k, m);
    std::optional<int64_t> length;
    if (k == 0) length = spec_.length;
    ScanResult forward;
    {
      NoGradGuard no_grad;
      forward = kiln::scan(
          [&](const Tensors& carry, const Tensors& x) {
            return std::make_pair(slice(step(concat(concat(carry, x), extra)), 0, n), carry);
          },
          init, xs, spec_.reverse, length, {});
    }
    // Step inputs: carry (n), x (k), extra (m); outputs: carry (n), ys (p).
    const std::vector<size_t> fc = floating_of(spec_.inputs, 0, n);
    const std::vector<size_t> fx = floating_of(spec_.inputs, n, k);
    const std::vector<size_t> fe = floating_of(spec_.inputs, n + k, m);
    std::vector<size_t> outs = fc;  // the carry's outputs sit at the carry's positions
    for (size_t j = 0; j < p; ++j) {
      if (is_floating(outputs_[n + j].dtype)) outs.push_back(n + j);
    }
    std::vector<size_t> ins = concat_indices({fc, fx, fe});
    Tensors carry_b;
    for (size_t i : fc)
      carry_b.push_back(grad_outputs[i]);
    for (size_t i : fe)
      carry_b.push_back(zeros_like(spec_.inputs[i]));
    Tensors xs_b = concat(forward.ys, xs);
    for (size_t j = 0; j < p; ++j) {
      if (is_floating(outputs_[n + j].dtype)) xs_b.push_back(grad_outputs[n + j]);
    }
    ScanResult backward = kiln::scan(
        [&](const Tensors& carry, const Tensors& x) {
          Tensors in = concat(slice(x, 0, n + k), extra);
          Tensors seeds = concat(slice(carry, 0, fc.size()), slice(x, n + k, x.size() - n - k));
          Tensors grads = vjp(step, in, ins, outs, seeds);
          Tensors next = slice(grads, 0, fc.size());
          for (size_t c = 0; c < fe.size(); ++c)  // summed over the steps
            next.push_back(add(carry[fc.size() + c], grads[fc.size() + fx.size() + c]));
          return std::make_pair(std::move(next), slice(grads, fc.size(), fx.size()));
        },
        carry_b, xs_b, !spec_.reverse, length, {});
    Tensors grads = slice(backward.carry, 0, fc.size());
    for (size_t c = 0; c < fx.size(); ++c)
      grads.push_back(backward.ys.at(c));
    for (size_t c = 0; c < fe.size(); ++c)
      grads.push_back(backward.carry[fc.size() + c]);
    return per_input(ins, grads);
  }

  // Over max_iterations steps: a forward scan that runs the body where the
  // condition holds (and passes the carry on where it does not, past the
  // loop's end), returning each step's incoming carry and whether the body
  // ran; then a reverse scan that applies the body's vjp where it ran.
  Tensors apply_while(const Tensors& grad_outputs) {
    const int64_t steps = spec_.max_iterations;
    KILN_CHECK(steps >= 0,
               "while_loop: no gradient without max_iterations: give the loop a bound "
               "(kiln.while_loop(..., max_iterations=N)), use fori_loop with static bounds or "
               "scan, or run it eagerly",
               at(spec_.site));
    const size_t n = spec_.num_carry, m = spec_.inputs.size() - n;
    const TensorsFn& cond_fn = spec_.blocks[0];
    const TensorsFn& body = spec_.blocks[1];
    const Tensors carried = slice(spec_.inputs, 0, n), extra = slice(spec_.inputs, n, m);
    const std::vector<size_t> fc = floating_of(spec_.inputs, 0, n);
    const std::vector<size_t> fe = floating_of(spec_.inputs, n, m);
    const std::vector<size_t> ins = concat_indices({fc, fe});
    Tensors carry_b;
    for (size_t i : fc)
      carry_b.push_back(grad_outputs[i]);
    for (size_t i : fe)
      carry_b.push_back(zeros_like(spec_.inputs[i]));
    if (steps == 0) return per_input(ins, carry_b);
    auto pass_on = [](const Tensors& values) { return values; };
    ScanResult forward;
    {
      NoGradGuard no_grad;
      forward = kiln::scan(
          [&](const Tensors& values, const Tensors&) {
            Tensor ran = reshape(cond_fn(concat(values, extra)).at(0), IntList{});
            auto run_body = [&](const Tensors& v) { return body(concat(v, extra)); };
            Tensors next = kiln::cond(ran, run_body, pass_on, values, {});
            Tensors ys = values;
            ys.push_back(ran);
            return std::make_pair(std::move(next), std::move(ys));
          },
          carried, {}, false, steps, {});
    }
    ScanResult backward = kiln::scan(
        [&](const Tensors& carry, const Tensors& x) {
          auto body_vjp = [&](const Tensors& args) {
            Tensors values = slice(args, 0, n), seeds = slice(args, n, fc.size());
            Tensors grads = vjp(body, concat(values, extra), ins, fc, seeds);
            Tensors next = slice(grads, 0, fc.size());
            for (size_t c = 0; c < fe.size(); ++c)
              next.push_back(add(args[n + fc.size() + c], grads[fc.size() + c]));
            return next;
          };
          auto skip = [&](const Tensors& args) { return slice(args, n, args.size() - n); };
          Tensors next = kiln::cond(x[n], body_vjp, skip, concat(slice(x, 0, n), carry), {});
          return std::make_pair(std::move(next), Tensors{});
        },
        carry_b, forward.ys, true, std::nullopt, {});
    return per_input(ins, backward.carry);
  }

  static std::vector<size_t> concat_indices(std::initializer_list<std::vector<size_t>> parts) {
    std::vector<size_t> all;
    for (const auto& part : parts)
      all.insert(all.end(), part.begin(), part.end());
    return all;
  }

  ControlFlowGradSpec spec_;
  std::vector<OutputMeta> outputs_;
};

}  // namespace

bool control_flow_requires_grad(const Tensors& inputs) {
  return grad_mode_enabled() && std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) {
           return t.defined() && t.requires_grad();
         });
}

Tensors with_control_flow_history(ControlFlowGradSpec spec, const Tensors& results) {
  std::vector<OutputMeta> metas;
  for (const Tensor& r : results)
    metas.push_back({r.shape(), r.dtype()});
  std::vector<Edge> edges;
  for (const Tensor& t : spec.inputs)
    edges.push_back(t.defined() ? gradient_edge(t) : Edge{});
  auto backward = std::make_shared<ControlFlowBackward>(std::move(spec), std::move(metas));
  backward->next_edges = std::move(edges);
  Tensors out;
  for (size_t i = 0; i < results.size(); ++i) {
    if (!is_floating(results[i].dtype())) {
      out.push_back(results[i]);
      continue;
    }
    // A view, never the tensor itself: a branch that returns its operand
    // must not rewrite that operand's history.
    out.push_back(detach(results[i]));
    set_history(out.back(), backward, int(i));
  }
  return out;
}

}  // namespace kiln
