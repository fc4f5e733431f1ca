// Every row of the op test table traced and run compiled: the graph replays
// the same kernels, so its outputs equal eager dispatch bitwise (random ops
// too, from the same seed).
#include <gtest/gtest.h>

#include "jit_test_util.h"
#include "kiln/core/random.h"
#include "kiln/jit/compile/trace.h"
#include "kiln/ops/dispatch.h"
#include "op_refs.h"

namespace kiln::jit {
namespace {

using nlohmann::json;

class JitOpParity : public testing::TestWithParam<size_t> {};

std::vector<Tensor> inputs_of(const json& row) {
  std::vector<Tensor> inputs;
  for (const json& in : row["inputs"])
    inputs.push_back(tensor_from_json(in));
  return inputs;
}

// Graph inputs are tensors: absent inputs stay absent and numbers stay
// numbers (constants of the graph).
bool is_graph_input(const Tensor& t) {
  return t.defined() && !t.impl()->wrapped_number;
}

std::vector<Tensor> graph_inputs(const std::vector<Tensor>& all) {
  std::vector<Tensor> out;
  for (const Tensor& t : all) {
    if (is_graph_input(t)) out.push_back(t);
  }
  return out;
}

TEST_P(JitOpParity, CompiledEqualsEager) {
  const json& row = op_refs()["cases"][GetParam()];
  const OpDef& def = op(row["op"].get<std::string>());
  const Attrs attrs = attrs_from_json(def, row["attrs"]);

  manual_seed(7);
  std::vector<Tensor> expected = dispatch(def, inputs_of(row), attrs);

  std::vector<Tensor> traced_with = inputs_of(row);
  auto fn = [&](const std::vector<Tensor>& in) {
    std::vector<Tensor> all = traced_with;
    for (size_t i = 0, k = 0; i < all.size(); ++i) {
      if (is_graph_input(all[i])) all[i] = in[k++];
    }
    return dispatch(def, all, attrs);
  };
  CapturedWarnings captured;
  CompiledFunction f = trace(fn, graph_inputs(traced_with));

  manual_seed(7);
  std::vector<Tensor> got = f(graph_inputs(inputs_of(row)));
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(same_bits(got[i], expected[i])) << row["id"] << " output " << i;
  EXPECT_EQ(captured.count(WarningKind::HostRead), 0u) << captured.all();
}

std::vector<size_t> value_rows() {  // error rows fail in eager: nothing to trace
  std::vector<size_t> idx;
  for (size_t i = 0; i < op_refs()["cases"].size(); ++i) {
    if (!op_refs()["cases"][i].contains("error")) idx.push_back(i);
  }
  return idx;
}

INSTANTIATE_TEST_SUITE_P(Rows, JitOpParity, testing::ValuesIn(value_rows()),
                         [](const testing::TestParamInfo<size_t>& info) {
                           return test_name_of(op_refs()["cases"][info.param]["id"]);
                         });

}  // namespace
}  // namespace kiln::jit
