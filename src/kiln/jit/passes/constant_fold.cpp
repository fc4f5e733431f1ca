// Constant folding:
//   %y = op(%c0, %c1, ...)   every input a constant (frozen: or a parameter)
//   -> %y = const <what op's own kernel computes from the inputs' data>
//
// The value is computed by dispatching the node's op on the inputs' tensors,
// so a folded graph gives bit for bit what the unfolded one would: no op's
// math is restated here. Nodes with effects (random draws, in-place writes)
// are never folded, and results much larger than their inputs stay computed.
// Neither are nodes whose result depends on symbolic sizes (a symbolic output
// type or size attribute: `zeros() {size=[batch, 4]}`): it is no constant.
// A node whose output size its data decides (nonzero) folds when only the
// graph's outputs read it: a node reading it is typed over its size symbol,
// which a constant would not bind.
#include <algorithm>
#include <memory>

#include "kiln/jit/ir/size_symbols.h"
#include "kiln/jit/passes/pass_util.h"
#include "kiln/jit/passes/passes.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/dispatch.h"

namespace kiln::jit {
namespace {

bool is_foldable_input(const Value* value, bool frozen) {
  if (value == nullptr) return true;  // an absent optional input
  if (value->kind() == ValueKind::Constant) return true;
  return frozen && value->kind() == ValueKind::Param && value->data().defined();
}

// Memory written in place while the graph runs (batch_norm's running
// statistics when training, in a parameter or even a constant) holds other
// data than at compile time, on either side of the node: no folding there.
bool has_foldable_inputs(const Node& node, bool frozen, const WrittenMemory& written) {
  for (const Value* in : node.inputs()) {
    if (!is_foldable_input(in, frozen) || (in && written.aliases(*in))) return false;
  }
  for (const Value* out : node.outputs()) {
    if (written.aliases(*out)) return false;
  }
  return true;
}

// A data-dependent node read by nothing but the graph's outputs, whose
// symbol nothing else mentions.
bool folds_with_its_symbol(const Node& node) {
  if (bound_symbol(node).empty() || size_symbol_read_elsewhere(node)) return false;
  return std::all_of(node.outputs().begin(), node.outputs().end(),
                     [](const Value* out) { return out->uses().empty(); });
}

bool depends_on_sizes(const Node& node) {
  for (const Value* out : node.outputs()) {
    if (!is_static(out->shape())) return true;
  }
  return node.attrs().any_symbolic();
}

int64_t bytes_of(const TensorMeta& type) {
  return numel_of(to_static(type.shape, "constant_fold")) * int64_t(element_size(type.dtype));
}

// A constant is stored in the graph (and in a saved model) and kept in
// memory for the graph's lifetime. When a result is larger than its inputs
// (expand or a broadcast of a scalar, fill over a big shape, an outer
// product), folding it trades a cheap computation per call for a large,
// permanent buffer; such results stay computed unless they are small anyway.
bool result_too_big(const Node& node, int64_t limit_bytes) {
  int64_t in_bytes = 0, out_bytes = 0;
  for (const Value* in : node.inputs())
    in_bytes += in ? bytes_of(in->type()) : 0;
  for (const Value* out : node.outputs())
    out_bytes += bytes_of(out->type());
  return out_bytes > limit_bytes && out_bytes > in_bytes;
}

// A folded constant owns its buffer: a view op's result would otherwise
// alias the input constant or a frozen parameter.
Tensor owned(const Tensor& result, const std::vector<Tensor>& inputs) {
  for (const Tensor& in : inputs) {
    if (in.defined() && result.is_alias_of(in)) return clone(result);
  }
  return result.is_contiguous() ? result : clone(result);
}

// Runs the node's op on its inputs' data; empty when the kernel refuses them
// (the error then happens when the graph runs, as it would eagerly).
std::vector<Tensor> evaluate(const Node& node, PassContext& context) {
  std::vector<Tensor> inputs;
  for (const Value* in : node.inputs())
    inputs.push_back(plain_data(in));
  try {
    NoDispatchObserver no_observer;
    std::vector<Tensor> results = dispatch(node.op(), inputs, node.attrs());
    for (Tensor& r : results)
      r = owned(r, inputs);
    return results;
  } catch (const Error& e) {
    context.note(str(node.op().name, " left unfolded: its kernel failed on the constant inputs (",
                     e.what(), ")"));
    return {};
  }
}

// Symbolic dims (a size the data decided) match any size.
bool matches_types(const Node& node, const std::vector<Tensor>& results) {
  if (results.size() != node.outputs().size()) return false;
  for (size_t i = 0; i < results.size(); ++i) {
    const Value* out = node.output(i);
    const IntList& shape = results[i].shape();
    bool dims_match = shape.size() == out->shape().size();
    for (size_t d = 0; dims_match && d < shape.size(); ++d) {
      const Dim& dim = out->shape()[d];
      dims_match = dim.is_symbolic() || dim.static_value() == shape[d];
    }
    if (results[i].dtype() != out->dtype() || !dims_match) return false;
  }
  return true;
}

bool fold(Graph& graph, Node* node, PassContext& context) {
  std::vector<Tensor> results = evaluate(*node, context);
  if (results.empty()) return false;
  KILN_ASSERT(matches_types(*node, results), "constant_fold: ", node->op().name,
              " computed results of other types than the node's outputs");
  const bool data_dependent = !bound_symbol(*node).empty();
  for (size_t i = 0; i < results.size(); ++i) {
    Value* out = node->output(i);
    if (!is_used(*out)) continue;
    Value* constant = graph.add_constant(results[i]);
    if (!data_dependent) {
      out->replace_all_uses_with(constant);
      continue;
    }
    std::vector<Value*> outputs = graph.outputs();  // its only readers
    std::replace(outputs.begin(), outputs.end(), out, constant);
    graph.set_outputs(std::move(outputs));
  }
  context.count_rule("fold " + node->op().name);
  graph.erase(node);
  return true;
}

}  // namespace

bool constant_fold(Graph& graph, PassContext& context) {
  const bool frozen = context.frozen();
  const int64_t limit = context.options().fold_size_limit_bytes;
  const WrittenMemory written(graph);
  bool changed = false;
  // Topological order: a folded node's users see constants when their turn comes.
  for (Node* node : graph.nodes()) {
    if (has_effects(*node) || !has_foldable_inputs(*node, frozen, written)) continue;
    if (node->num_blocks()) continue;  // control flow folds in its blocks, not whole
    const bool with_symbol = folds_with_its_symbol(*node);
    if (depends_on_sizes(*node) && !with_symbol) continue;
    if (is_dead(*node)) continue;  // dead code is dce's to remove, not worth computing
    if (!with_symbol && result_too_big(*node, limit)) {
      context.note(str(node->op().name, " left unfolded: its result is larger than ", limit,
                       " bytes and than its inputs"));
      continue;
    }
    changed |= fold(graph, node, context);
  }
  return changed;
}

}  // namespace kiln::jit
