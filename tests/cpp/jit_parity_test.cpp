// Every row of the op test table (tests/oracle/cases_*.py), run eagerly
// through dispatch and compiled as a one-node graph through Executable: the
// results must be equal bit for bit, since both run the same kernels.
// Error rows must fail compiled too, with the same message.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "jit_test_util.h"
#include "kiln/core/random.h"
#include "kiln/jit/exec/executable.h"
#include "kiln/ops/dispatch.h"
#include "op_refs.h"

namespace kiln::jit {
namespace {

using nlohmann::json;

// The row's op as the only node of a graph. Tensor inputs become graph
// inputs (with the cast node dispatch would insert where the kernel wants
// another dtype); Python numbers become wrapped-number constants, cast as
// dispatch casts them.
struct OneNodeGraph {
  std::shared_ptr<Graph> graph = std::make_shared<Graph>();
  std::vector<size_t> graph_inputs;  // which of the row's inputs they are
};

OneNodeGraph one_node_graph(const OpDef& def, const std::vector<Tensor>& inputs,
                            const Attrs& attrs) {
  std::vector<TensorMeta> metas;
  for (const Tensor& t : inputs)
    metas.push_back(meta_of(t));
  const InferResult inferred = infer_meta(def, metas, normalize_attrs(def, attrs));
  OneNodeGraph one;
  Graph& g = *one.graph;
  std::vector<Value*> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined()) {
      values.push_back(nullptr);
      continue;
    }
    const DType want = inferred.input_dtypes.empty() ? t.dtype() : inferred.input_dtypes[i];
    if (t.impl()->wrapped_number) {
      Tensor number = to(t, want);
      number.impl()->wrapped_number = true;
      values.push_back(g.add_constant(number, /*wrapped_number=*/true));
      continue;
    }
    Value* v = g.add_input(meta_of(t), str("in", i));
    one.graph_inputs.push_back(i);
    if (t.dtype() != want) v = g.append(op("cast"), {v}, {{"dtype", want}})->output();
    values.push_back(v);
  }
  Node* node = g.append(def, values, attrs);
  g.set_outputs(node->outputs());
  return one;
}

std::vector<Tensor> row_inputs(const json& row, bool dense) {
  std::vector<Tensor> inputs;
  for (const json& spec : row["inputs"]) {
    Tensor t = tensor_from_json(spec);
    if (dense && t.defined() && !t.impl()->wrapped_number) t = clone(t);
    inputs.push_back(t);
  }
  return inputs;
}

class JitParityTest : public testing::TestWithParam<size_t> {};

// Eager and compiled each get their own copy of the inputs: batch_norm
// writes its running statistics into them, and those must match too.
void expect_parity(const json& row, bool dense) {
  const OpDef& def = op(row["op"].get<std::string>());
  const Attrs attrs = attrs_from_json(def, row["attrs"]);
  const std::string where = str(row["id"].get<std::string>(), dense ? " (dense inputs)" : "");
  std::vector<Tensor> eager_inputs = row_inputs(row, dense);
  std::vector<Tensor> compiled_inputs = row_inputs(row, dense);

  manual_seed(1234);  // dropout draws the same numbers both ways
  std::vector<Tensor> want = dispatch(def, eager_inputs, attrs);

  OneNodeGraph one = one_node_graph(def, compiled_inputs, attrs);
  Executable exe(one.graph);
  std::vector<Tensor> args;
  for (size_t i : one.graph_inputs)
    args.push_back(compiled_inputs[i]);
  manual_seed(1234);
  std::vector<Tensor> got = exe.run(args);

  ASSERT_EQ(got.size(), want.size()) << where;
  for (size_t k = 0; k < got.size(); ++k)
    EXPECT_TRUE(bitwise_equal(got[k], want[k])) << where << " output " << k;
  for (size_t i = 0; i < eager_inputs.size(); ++i) {
    if (!eager_inputs[i].defined()) continue;
    EXPECT_TRUE(bitwise_equal(compiled_inputs[i], eager_inputs[i]))
        << where << " input " << i << " after the call";
  }
}

// An error row fails compiled as it fails eagerly: while building the
// graph (shape inference), while compiling, or while running (a kernel's
// check on the values, such as an index out of range).
void expect_same_error(const json& row) {
  const OpDef& def = op(row["op"].get<std::string>());
  const std::string expected = row["error"];
  std::vector<Tensor> inputs = row_inputs(row, false);
  try {
    const Attrs attrs = attrs_from_json(def, row["attrs"]);
    OneNodeGraph one = one_node_graph(def, inputs, attrs);
    Executable exe(one.graph);
    std::vector<Tensor> args;
    for (size_t i : one.graph_inputs)
      args.push_back(inputs[i]);
    exe.run(args);
    FAIL() << row["id"] << ": expected an error containing '" << expected << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos)
        << row["id"] << ": error '" << e.what() << "' lacks '" << expected << "'";
  }
}

TEST_P(JitParityTest, CompiledEqualsEager) {
  const json& row = op_refs()["cases"][GetParam()];
  if (row.contains("error")) {
    expect_same_error(row);
    return;
  }
  expect_parity(row, /*dense=*/false);
  bool strided = false;
  for (const Tensor& t : row_inputs(row, false))
    strided |= t.defined() && !t.is_contiguous();
  // Strided inputs took the executor's slow path; dense ones take the plan's.
  if (strided) expect_parity(row, /*dense=*/true);
}

std::vector<size_t> row_indices() {
  std::vector<size_t> indices(op_refs()["cases"].size());
  for (size_t i = 0; i < indices.size(); ++i)
    indices[i] = i;
  return indices;
}

INSTANTIATE_TEST_SUITE_P(Rows, JitParityTest, testing::ValuesIn(row_indices()),
                         [](const testing::TestParamInfo<size_t>& info) {
                           return test_name_of(op_refs()["cases"][info.param]["id"]);
                         });

}  // namespace
}  // namespace kiln::jit
