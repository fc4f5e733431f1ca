// Replays the op test table (tests/oracle/cases_*.py, run through PyTorch by
// gen_refs.py) through kiln's dispatch: every row's outputs must match
// PyTorch's at its tolerance, or its error must carry the expected text.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "kiln/core/factory.h"
#include "kiln/ops/collective_ops.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/custom_function_ops.h"
#include "kiln/ops/dispatch.h"
#include "op_refs.h"

namespace kiln {
namespace {

using nlohmann::json;

class OpTableTest : public testing::TestWithParam<size_t> {};

void expect_close(const Tensor& got, const json& want, double rtol, double atol,
                  const std::string& where) {
  IntList shape = want["shape"].get<IntList>();
  ASSERT_EQ(got.shape(), shape) << where;
  ASSERT_EQ(to_string(got.dtype()), want["dtype"].get<std::string>()) << where;
  const json& data = want["data"];
  for (int64_t i = 0; i < got.numel(); ++i) {
    Scalar g = read_element(got, i);
    if (got.dtype() == DType::Bool || is_integral(got.dtype())) {
      ASSERT_EQ(g.to_int(),
                data[i].is_boolean() ? int64_t(data[i].get<bool>()) : data[i].get<int64_t>())
          << where << " at flat index " << i;
      continue;
    }
    double w = json_number(data[i]);
    double v = g.to_double();
    if (std::isnan(w)) {
      ASSERT_TRUE(std::isnan(v)) << where << " at flat index " << i << ": got " << v;
      continue;
    }
    if (std::isinf(w)) {
      ASSERT_EQ(v, w) << where << " at flat index " << i;
      continue;
    }
    ASSERT_LE(std::fabs(v - w), atol + rtol * std::fabs(w))
        << where << " at flat index " << i << ": got " << v << ", want " << w;
  }
}

TEST_P(OpTableTest, MatchesPyTorch) {
  const json& c = op_refs()["cases"][GetParam()];
  const std::string id = c["id"];
  const OpDef& def = op(c["op"].get<std::string>());
  std::vector<Tensor> inputs;
  for (const json& in : c["inputs"])
    inputs.push_back(tensor_from_json(in));
  if (c.contains("error")) {
    const std::string expected = c["error"];
    try {
      dispatch(def, inputs, attrs_from_json(def, c["attrs"]));
      FAIL() << id << ": expected an error containing '" << expected << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos)
          << id << ": error '" << e.what() << "' lacks '" << expected << "'";
    }
    return;
  }
  std::vector<Tensor> outputs = dispatch(def, inputs, attrs_from_json(def, c["attrs"]));
  std::vector<size_t> compared;
  if (c.contains("compare_outputs")) {
    for (const json& i : c["compare_outputs"])
      compared.push_back(i.get<size_t>());
  } else {
    for (size_t i = 0; i < c["outputs"].size(); ++i)
      compared.push_back(i);
  }
  ASSERT_EQ(compared.size(), c["outputs"].size()) << id;
  for (size_t k = 0; k < compared.size(); ++k) {
    ASSERT_LT(compared[k], outputs.size()) << id;
    expect_close(outputs[compared[k]], c["outputs"][k], c["rtol"], c["atol"],
                 id + " output " + std::to_string(compared[k]));
  }
}

std::vector<size_t> case_indices() {
  std::vector<size_t> idx(op_refs()["cases"].size());
  for (size_t i = 0; i < idx.size(); ++i)
    idx[i] = i;
  return idx;
}

INSTANTIATE_TEST_SUITE_P(Rows, OpTableTest, testing::ValuesIn(case_indices()),
                         [](const testing::TestParamInfo<size_t>& info) {
                           return test_name_of(op_refs()["cases"][info.param]["id"]);
                         });

TEST(OpTable, EveryOpHasARow) {
  std::set<std::string> covered;
  for (const json& c : op_refs()["cases"]) {
    if (!c.contains("error")) covered.insert(c["op"].get<std::string>());
  }
  for (const OpDef* def : op_registry().all()) {
    // Control flow runs sub-graphs, not tensors in and out: its rows are the
    // tests of jit_control_flow_*_test.cpp (JitControlFlowIr.OpsWithBlocks).
    if (!def->blocks.empty()) continue;
    // custom_function calls back into a Function registered at run time:
    // tests/cpp/autograd_function_test.cpp and the Python tests run it.
    if (runs_registered_callbacks(*def)) continue;
    // Collectives need a process group of several ranks: PyTorch has no
    // one-process value to compare with. collective_ops_test.cpp and
    // tests/python/test_ddp.py (under mpirun) run them.
    if (is_collective(*def)) continue;
    EXPECT_TRUE(covered.count(def->name))
        << "op '" << def->name << "' has no passing-value row in tests/oracle/cases_*.py";
  }
}

// The flags fusion reads instead of lists of names: an activation is
// elementwise on one input; one a fused op can carry has a backward that
// reads only its output. That the carried ones' rules really read only the
// output is what linear_act's and conv2d_act's gradient rows check (their
// backward context refuses to give the activation its input).
TEST(OpTable, ActivationFlagsMatchTheBackwardRules) {
  std::set<std::string> activations, carried;
  for (const OpDef* def : op_registry().all()) {
    if (def->is_activation) {
      activations.insert(def->name);
      EXPECT_EQ(def->kind, OpKind::Elementwise) << def->name;
    }
    if (def->fuses_after_producer()) carried.insert(def->name);
    EXPECT_TRUE(def->is_activation || !def->grad_reads_output_only) << def->name;
  }
  EXPECT_EQ(carried, (std::set<std::string>{"relu", "sigmoid", "tanh"}));
  EXPECT_TRUE(activations.count("gelu") && activations.count("leaky_relu") &&
              activations.count("elu") && activations.count("softplus"));
  EXPECT_FALSE(activations.count("exp") || activations.count("neg"));
}

}  // namespace
}  // namespace kiln
