// Structured control flow: cond, while_loop, scan and fori_loop, over flat
// lists of tensors (the Python front end flattens pytrees onto these).
//
// Eagerly each runs the functions it is given, as plain code would, so
// autograd sees the ops the taken path ran. While a trace records on the
// thread, a ControlFlowTracer (the recorder, in jit/trace) takes the call
// instead and records one node owning sub-graphs: both branches of a cond,
// a loop's condition and body, a scan's step. That is what keeps a loop a
// loop in the graph rather than one unrolled path.
//
//   auto out = kiln::cond(x.sum().gt(0), [](const Tensors& v) { return Tensors{v[0] * 2}; },
//                         [](const Tensors& v) { return Tensors{v[0] - 1}; }, {x});
#pragma once

#include <functional>
#include <optional>
#include <source_location>
#include <utility>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln {

using Tensors = std::vector<Tensor>;
// A branch or loop body: tensors in, tensors out.
using TensorsFn = std::function<Tensors(const Tensors&)>;
// A loop condition: a one-element bool tensor.
using PredicateFn = std::function<Tensor(const Tensors&)>;
// A scan step: (carry, the slices of xs at one step) -> (new carry, ys at that step).
using ScanStepFn = std::function<std::pair<Tensors, Tensors>(const Tensors&, const Tensors&)>;
// A fori_loop body: (i, carried) -> carried; i is a 0-d int64 tensor.
using LoopBodyFn = std::function<Tensors(const Tensor&, const Tensors&)>;

struct ScanResult {
  Tensors carry;  // the carry after the last step
  Tensors ys;     // each step's ys stacked along a new leading dim
};

// true_fn(operands) when `pred` (a one-element bool tensor) is true, else
// false_fn(operands). Recorded, both branches must return as many tensors of
// equal dtypes and shapes.
Tensors cond(const Tensor& pred, const TensorsFn& true_fn, const TensorsFn& false_fn,
             const Tensors& operands, std::source_location where = std::source_location::current());

// carried = body_fn(carried) while cond_fn(carried) is true; the body keeps
// each carried value's dtype and shape. Past `max_iterations` iterations it
// is an error; a bound also makes the loop differentiable once compiled.
Tensors while_loop(const PredicateFn& cond_fn, const TensorsFn& body_fn, const Tensors& carried,
                   std::optional<int64_t> max_iterations = std::nullopt,
                   std::source_location where = std::source_location::current());

// Runs fn over the leading dim of every xs (all of one length; `length`
// gives the step count when xs is empty), threading the carry, and stacks
// the ys. reverse: from the last step to the first (ys keep xs's order).
ScanResult scan(const ScanStepFn& fn, const Tensors& init, const Tensors& xs, bool reverse = false,
                std::optional<int64_t> length = std::nullopt,
                std::source_location where = std::source_location::current());

// carried = body(i, carried) for i in [lower, upper). With integer bounds
// the trip count is static (a scan: differentiable); with tensor bounds
// (0-d integers) it is a while_loop.
Tensors fori_loop(int64_t lower, int64_t upper, const LoopBodyFn& body, const Tensors& init,
                  std::source_location where = std::source_location::current());
Tensors fori_loop(const Tensor& lower, const Tensor& upper, const LoopBodyFn& body,
                  const Tensors& init,
                  std::source_location where = std::source_location::current());

// What a recording trace implements to take control flow over (jit/trace's
// Recorder). Installed per thread; null when nothing records.
class ControlFlowTracer {
 public:
  virtual ~ControlFlowTracer() = default;
  virtual Tensors cond(const Tensor& pred, const TensorsFn& true_fn, const TensorsFn& false_fn,
                       const Tensors& operands, const std::source_location& where) = 0;
  virtual Tensors while_loop(const PredicateFn& cond_fn, const TensorsFn& body_fn,
                             const Tensors& carried, std::optional<int64_t> max_iterations,
                             const std::source_location& where) = 0;
  virtual ScanResult scan(const ScanStepFn& fn, const Tensors& init, const Tensors& xs,
                          bool reverse, int64_t length, const std::source_location& where) = 0;
};
ControlFlowTracer* control_flow_tracer();
void set_control_flow_tracer(ControlFlowTracer* tracer);

namespace control_flow {
// Shared by the eager paths and the recorder: the checks and the error
// messages are one.
void check_predicate(const Tensor& pred, const char* op, const std::source_location& where);
// `after` keeps the count, dtypes and shapes of `before` (what: "loop body").
void check_same_types(const Tensors& before, const Tensors& after, const char* op, const char* what,
                      const std::source_location& where);
// The step count of a scan over xs (and length, when given).
int64_t scan_length(const Tensors& xs, std::optional<int64_t> length,
                    const std::source_location& where);
// "file:line" of a call site, or "" when unknown.
std::string site(const std::source_location& where);
}  // namespace control_flow

}  // namespace kiln
