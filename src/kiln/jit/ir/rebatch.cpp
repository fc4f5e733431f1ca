#include "kiln/jit/ir/rebatch.h"

#include "kiln/jit/ir/specialize.h"
#include "kiln/jit/ir/text_format.h"
#include "kiln/util/error.h"

namespace kiln::jit {
namespace {

// Whether `now` is `before` with the first dimension `old_batch` made
// `batch`, or `before` unchanged.
bool follows_batch(const DimList& before_dims, const DimList& now_dims, int64_t old_batch,
                   int64_t batch) {
  const IntList before = to_static(before_dims, "rebatch"), now = to_static(now_dims, "rebatch");
  if (before == now) return true;
  if (before.empty() || before.size() != now.size() || before[0] != old_batch || now[0] != batch)
    return false;
  return std::equal(before.begin() + 1, before.end(), now.begin() + 1);
}

// Ops that take a target shape as an attribute (view and reshape, which is
// how flatten is recorded; expand) carry the traced batch in it. When the
// shape starts with the old batch and so does the input, the batch is
// swapped for the new one; the check on the output shape below catches a
// first dimension that only looked like the batch.
Attrs batch_attrs(const Node& node, int64_t old_batch, int64_t batch) {
  Attrs attrs = node.attrs();
  const Value* input = node.inputs().empty() ? nullptr : node.input(0);
  if (!input || input->shape().empty() ||
      require_static(input->shape()[0], "rebatch", "batch size") != old_batch) {
    return attrs;
  }
  for (const char* name : {"shape", "size"}) {
    bool has = false;
    for (const auto& item : attrs.items())
      has = has || item.first == name;
    if (!has || !std::holds_alternative<IntList>(attrs.get(name))) continue;
    IntList shape = attrs.get_ints(name);
    if (shape.empty() || shape[0] != old_batch) continue;
    shape[0] = batch;
    attrs.set(name, shape);
  }
  return attrs;
}

}  // namespace

int64_t batch_size_of(const Graph& graph) {
  int64_t batch = -1;
  for (const Value* input : graph.inputs()) {
    const IntList shape = to_static(input->shape(), "rebatch");
    if (shape.empty()) continue;
    KILN_CHECK_VALUE(batch < 0 || shape[0] == batch,
                     "rebatch: the graph's inputs disagree on the batch size (", batch, " and ",
                     shape[0], ")");
    batch = shape[0];
  }
  KILN_CHECK_VALUE(batch >= 0, "rebatch: the graph has no input with a batch dimension");
  return batch;
}

std::shared_ptr<Graph> rebatch(const Graph& graph, int64_t batch) {
  KILN_CHECK_VALUE(batch > 0, "rebatch: the batch size must be positive, got ", batch);
  const int64_t old_batch = batch_size_of(graph);
  TypeRewrite rewrite;
  rewrite.input_type = [&](const Value& input) {
    TensorMeta type = input.type();
    if (!type.shape.empty()) type.shape[0] = batch;
    return type;
  };
  rewrite.attrs = [&](const Node& node) { return batch_attrs(node, old_batch, batch); };
  rewrite.explain = [&](const std::string& name, const Node& node) {
    return str("rebatch: cannot run ", name, " = ", node.op().name, "(...) at batch ", batch,
               " (traced at ", old_batch, "): ");
  };
  rewrite.check = [&](const std::string& name, const Node& node, const Value& before,
                      const Value& now) {
    KILN_CHECK_VALUE(follows_batch(before.shape(), now.shape(), old_batch, batch),
                     "rebatch: ", name, " = ", node.op().name, "(...) is ",
                     type_to_text(before.type()), " at batch ", old_batch, " but ",
                     type_to_text(now.type()), " at batch ", batch,
                     "; its shape depends on the batch in another way than its first "
                     "dimension, so the graph must be traced again at this batch");
  };
  return rewrite_types(graph, rewrite);
}

}  // namespace kiln::jit
