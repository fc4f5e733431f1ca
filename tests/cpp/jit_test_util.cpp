#include "jit_test_util.h"

#include "kiln/core/factory.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/fused.h"
#include "op_refs.h"

namespace kiln::jit {

std::shared_ptr<Graph> conv3x3_graph(const Tensor& w, IntList input_shape) {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input(f32(std::move(input_shape)), "x");
  Value* wv = g->add_param("w", f32(w.shape()), w);
  Value* y = g->append(op("conv2d"), {x, wv, nullptr},
                       {{"stride", IntList{1, 1}},
                        {"padding", IntList{1, 1}},
                        {"dilation", IntList{1, 1}},
                        {"groups", int64_t(1)}})
                 ->output();
  g->set_outputs({y});
  return g;
}

std::unique_ptr<Graph> small_mlp() {
  auto g = std::make_unique<Graph>();
  Value* x = g->add_input(meta(DType::Float32, {2, 8}), "x");
  Value* w1 = g->add_param("layers.0.weight", meta(DType::Float32, {4, 8}));
  Value* b1 = g->add_param("layers.0.bias", meta(DType::Float32, {4}));
  Value* w2 = g->add_param("layers.2.weight", meta(DType::Float32, {3, 4}));
  Value* half = g->add_constant(wrap_scalar(0.5), /*wrapped_number=*/true);
  Node* fc1 = g->append(op("linear"), {x, w1, b1});
  Node* act = g->append(op("relu"), {fc1->output()});
  Node* half_f32 = g->append(op("cast"), {half}, {{"dtype", DType::Float32}});
  Node* scaled = g->append(op("mul"), {act->output(), half_f32->output()});
  Node* fc2 = g->append(op("linear"), {scaled->output(), w2, nullptr});
  Node* best = g->append(op("max"), {fc2->output()}, {{"dim", 1}});
  g->set_outputs({best->output(0), best->output(1)});
  return g;
}

namespace {

Value* source_of(Graph& g, const nlohmann::json& spec, bool as_constant) {
  Tensor t = tensor_from_json(spec);
  if (t.impl()->wrapped_number) return g.add_constant(t, true);
  if (as_constant) return g.add_constant(t);
  return g.add_input(meta_of(t), "");
}

}  // namespace

std::unique_ptr<Graph> graph_of_row(const nlohmann::json& row, bool inputs_as_constants) {
  auto g = std::make_unique<Graph>();
  const OpDef& def = op(row["op"].get<std::string>());
  Attrs attrs = attrs_from_json(def, row["attrs"]);
  std::vector<Value*> inputs;
  std::vector<TensorMeta> metas;
  for (const nlohmann::json& spec : row["inputs"]) {
    bool absent = spec.value("absent", false);
    inputs.push_back(absent ? nullptr : source_of(*g, spec, inputs_as_constants));
    metas.push_back(absent ? TensorMeta{DType::Float32, {}, false, false} : inputs.back()->type());
  }
  InferResult inferred = infer_meta(def, metas, normalize_attrs(def, attrs));
  for (size_t i = 0; i < inferred.input_dtypes.size(); ++i) {
    if (!inputs[i] || inputs[i]->dtype() == inferred.input_dtypes[i]) continue;
    inputs[i] = g->append(op("cast"), {inputs[i]}, {{"dtype", inferred.input_dtypes[i]}})->output();
  }
  Node* node = g->append(def, inputs, attrs);
  g->set_outputs(node->outputs());
  return g;
}

size_t count_op_runs(const Graph& g, const std::string& op_name) {
  size_t n = 0;
  for (const Node* node : g.nodes()) {
    n += node->op().name == op_name;
    if (node->op().name != "fused_elementwise") continue;
    for (const Instruction& ins : parse_program(node->attrs().get_string("program")).instructions)
      n += ins.op->name == op_name;
  }
  return n;
}

}  // namespace kiln::jit
