// The eager paths of cond, while_loop, scan and fori_loop, and the checks
// the recorder shares with them.
#include "kiln/ops/control_flow.h"

#include <filesystem>

#include "kiln/core/factory.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/registry.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/view.h"
#include "kiln/util/error.h"

namespace kiln {

namespace {
thread_local ControlFlowTracer* current_tracer = nullptr;
}  // namespace

ControlFlowTracer* control_flow_tracer() {
  return current_tracer;
}
void set_control_flow_tracer(ControlFlowTracer* tracer) {
  current_tracer = tracer;
}

namespace control_flow {

std::string site(const std::source_location& where) {
  if (where.line() == 0 || where.file_name()[0] == '\0') return "";
  return str(std::filesystem::path(where.file_name()).filename().string(), ":", where.line());
}

namespace {
std::string at(const std::source_location& where) {
  std::string s = site(where);
  return s.empty() ? "" : " (at " + s + ")";
}
}  // namespace

void check_predicate(const Tensor& pred, const char* op, const std::source_location& where) {
  KILN_CHECK_TYPE(pred.defined(), op, ": the predicate is an undefined tensor", at(where));
  KILN_CHECK_TYPE(pred.dtype() == DType::Bool && pred.numel() == 1, op,
                  ": the predicate must be a one-element bool tensor, got ", pred.dtype(),
                  " of shape ", pred.shape(), at(where));
}

void check_same_types(const Tensors& before, const Tensors& after, const char* op, const char* what,
                      const std::source_location& where) {
  KILN_CHECK_TYPE(before.size() == after.size(), op, ": the ", what, " returned ", after.size(),
                  " tensors where ", before.size(), " were expected", at(where));
  for (size_t i = 0; i < before.size(); ++i) {
    const Tensor& a = before[i];
    const Tensor& b = after[i];
    KILN_CHECK_TYPE(b.defined(), op, ": the ", what, " returned an undefined tensor at position ",
                    i, at(where));
    KILN_CHECK_TYPE(a.dtype() == b.dtype() && a.shape() == b.shape(), op, ": the ", what,
                    " changed value ", i, " from ", a.dtype(), " ", a.shape(), " to ", b.dtype(),
                    " ", b.shape(), at(where));
  }
}

int64_t scan_length(const Tensors& xs, std::optional<int64_t> length,
                    const std::source_location& where) {
  std::optional<int64_t> n = length;
  for (size_t i = 0; i < xs.size(); ++i) {
    KILN_CHECK_VALUE(xs[i].defined() && xs[i].dim() >= 1,
                     "scan: xs must have a leading dim to scan over; xs[", i, "] has shape ",
                     xs[i].defined() ? xs[i].shape() : IntList{}, at(where));
    int64_t len = xs[i].shape()[0];
    KILN_CHECK_VALUE(!n || *n == len, "scan: xs[", i, "] has ", len, " steps where ", *n,
                     " were expected", at(where));
    n = len;
  }
  KILN_CHECK_VALUE(n.has_value(), "scan: no xs to scan over and no length given", at(where));
  KILN_CHECK_VALUE(*n >= 0, "scan: length must be >= 0, got ", *n, at(where));
  return *n;
}

}  // namespace control_flow

Tensors cond(const Tensor& pred, const TensorsFn& true_fn, const TensorsFn& false_fn,
             const Tensors& operands, std::source_location where) {
  control_flow::check_predicate(pred, "cond", where);
  if (ControlFlowTracer* tracer = control_flow_tracer())
    return tracer->cond(pred, true_fn, false_fn, operands, where);
  return pred.item<bool>(where) ? true_fn(operands) : false_fn(operands);
}

Tensors while_loop(const PredicateFn& cond_fn, const TensorsFn& body_fn, const Tensors& carried,
                   std::optional<int64_t> max_iterations, std::source_location where) {
  KILN_CHECK_VALUE(!max_iterations || *max_iterations >= 0,
                   "while_loop: max_iterations must be >= 0, got ", *max_iterations,
                   control_flow::at(where));
  if (ControlFlowTracer* tracer = control_flow_tracer())
    return tracer->while_loop(cond_fn, body_fn, carried, max_iterations, where);
  Tensors values = carried;
  for (int64_t iteration = 0;; ++iteration) {
    Tensor pred = cond_fn(values);
    control_flow::check_predicate(pred, "while_loop", where);
    if (!pred.item<bool>(where)) return values;
    KILN_CHECK(!max_iterations || iteration < *max_iterations,
               "while_loop: the loop exceeded max_iterations=", *max_iterations,
               control_flow::at(where));
    Tensors next = body_fn(values);
    control_flow::check_same_types(values, next, "while_loop", "loop body", where);
    values = std::move(next);
  }
}

ScanResult scan(const ScanStepFn& fn, const Tensors& init, const Tensors& xs, bool reverse,
                std::optional<int64_t> length, std::source_location where) {
  int64_t steps = control_flow::scan_length(xs, length, where);
  if (ControlFlowTracer* tracer = control_flow_tracer())
    return tracer->scan(fn, init, xs, reverse, steps, where);
  ScanResult result{init, {}};
  std::vector<Tensors> per_step(static_cast<size_t>(steps));
  for (int64_t k = 0; k < steps; ++k) {
    int64_t t = reverse ? steps - 1 - k : k;
    Tensors slices;
    for (const Tensor& x : xs)
      slices.push_back(select(x, 0, t));
    auto [carry, ys] = fn(result.carry, slices);
    control_flow::check_same_types(result.carry, carry, "scan", "step's carry", where);
    if (k > 0)
      control_flow::check_same_types(per_step[size_t(reverse ? t + 1 : t - 1)], ys, "scan",
                                     "step's ys", where);
    result.carry = std::move(carry);
    per_step[size_t(t)] = std::move(ys);
  }
  if (steps == 0) return result;  // no step ran: no ys to know the types of
  for (size_t j = 0; j < per_step[0].size(); ++j) {
    std::vector<Tensor> column;
    column.reserve(size_t(steps));
    for (const Tensors& ys : per_step)
      column.push_back(ys[j]);
    result.ys.push_back(stack(column, 0));
  }
  return result;
}

Tensors fori_loop(int64_t lower, int64_t upper, const LoopBodyFn& body, const Tensors& init,
                  std::source_location where) {
  int64_t steps = std::max<int64_t>(upper - lower, 0);
  Tensors carry = init;
  carry.push_back(scalar_tensor(lower, DType::Int64));
  ScanResult result = scan(
      [&](const Tensors& state, const Tensors&) {
        Tensors values(state.begin(), state.end() - 1);
        const Tensor& i = state.back();
        Tensors next = body(i, values);
        next.push_back(add(i, scalar_tensor(1, DType::Int64)));
        return std::pair<Tensors, Tensors>(std::move(next), {});
      },
      carry, {}, false, steps, where);
  result.carry.pop_back();
  return result.carry;
}

Tensors fori_loop(const Tensor& lower, const Tensor& upper, const LoopBodyFn& body,
                  const Tensors& init, std::source_location where) {
  for (const Tensor* bound : {&lower, &upper})
    KILN_CHECK_TYPE(bound->defined() && bound->numel() == 1 && is_integral(bound->dtype()),
                    "fori_loop: bounds must be one-element integer tensors, got ",
                    bound->defined() ? to_string(bound->dtype()) : "undefined",
                    control_flow::at(where));
  Tensors carry = init;
  carry.push_back(reshape(to(lower, DType::Int64), IntList{}));
  carry.push_back(reshape(to(upper, DType::Int64), IntList{}));
  Tensors result =
      while_loop([](const Tensors& state) { return lt(state[state.size() - 2], state.back()); },
                 [&](const Tensors& state) {
                   Tensors values(state.begin(), state.end() - 2);
                   const Tensor& i = state[state.size() - 2];
                   Tensors next = body(i, values);
                   next.push_back(add(i, scalar_tensor(1, DType::Int64)));
                   next.push_back(state.back());
                   return next;
                 },
                 carry, std::nullopt, where);
  result.resize(result.size() - 2);
  return result;
}

namespace {
// A control-flow node is typed from its blocks, which only a graph has.
InferResult infer_in_graph_only(const InferArgs& args) {
  KILN_CHECK(false, args.op.name, " is control flow: call kiln::", args.op.name,
             " (ops/control_flow.h); in a graph its node is typed from its sub-graphs");
  return {};
}
}  // namespace

void register_control_flow_ops(OpRegistry& registry) {
  // Inputs, blocks and outputs as jit/ir/control_flow.h lays them out; the
  // ONNX forms are If, Loop and Scan.
  registry.add(OpDef{.name = "cond",
                     .max_inputs = -1,
                     .num_outputs = -1,
                     .infer = infer_in_graph_only,
                     .blocks = {"then", "else"},
                     .onnx = {"If"}});
  registry.add(OpDef{.name = "while_loop",
                     .min_inputs = 0,
                     .max_inputs = -1,
                     .num_outputs = -1,
                     .attrs = {{"num_carried", AttrKind::Int, AttrValue()},
                               {"max_iterations", AttrKind::Int, int64_t(-1)}},
                     .infer = infer_in_graph_only,
                     .blocks = {"cond", "body"},
                     .onnx = {"Loop"}});
  registry.add(OpDef{.name = "scan",
                     .min_inputs = 0,
                     .max_inputs = -1,
                     .num_outputs = -1,
                     .attrs = {{"num_carry", AttrKind::Int, AttrValue()},
                               {"num_xs", AttrKind::Int, AttrValue()},
                               {"reverse", AttrKind::Bool, false},
                               {"length", AttrKind::Int, AttrValue()}},
                     .infer = infer_in_graph_only,
                     .blocks = {"step"},
                     .onnx = {"Scan"}});
}

}  // namespace kiln
