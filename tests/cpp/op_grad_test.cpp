// Gradients of every row of the op test table that has them: kiln's backward
// against PyTorch's (float32 and float64 as the row has them), and against
// float64 central finite differences of kiln's own forward.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/custom_function_ops.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "op_refs.h"

namespace kiln {
namespace {

using nlohmann::json;

struct GradRow {
  const json& row;
  const OpDef& def;
  std::vector<Tensor> inputs;
  std::vector<size_t> wanted;  // inputs with a gradient in the row

  explicit GradRow(const json& r) : row(r), def(op(r["op"].get<std::string>())) {
    for (size_t i = 0; i < row["inputs"].size(); ++i) {
      inputs.push_back(tensor_from_json(row["inputs"][i]));
      if (!row["grads"][i].is_null()) wanted.push_back(i);
    }
  }

  // Which kiln output each PyTorch output corresponds to.
  size_t kiln_output(size_t k) const {
    return row.contains("compare_outputs") ? row["compare_outputs"][k].get<size_t>() : k;
  }

  // d(sum_k <out_k, grad_out_k>)/d(inputs[wanted]) through kiln's backward,
  // after converting float32 inputs to `dtype` (float64 for the FD check).
  std::vector<Tensor> backward_grads(const std::vector<Tensor>& ins, std::optional<DType> dtype) {
    std::vector<Tensor> outputs = dispatch(def, ins, attrs_from_json(def, row["attrs"]));
    std::vector<Tensor> roots, seeds;
    for (size_t k = 0; k < row["grad_outputs"].size(); ++k) {
      const json& g = row["grad_outputs"][k];
      if (g.is_null()) continue;
      roots.push_back(outputs.at(kiln_output(k)));
      Tensor seed = tensor_from_json(g);
      seeds.push_back(dtype ? to(seed, *dtype) : seed);
    }
    std::vector<Tensor> leaves;
    for (size_t i : wanted)
      leaves.push_back(ins[i]);
    return grad(roots, leaves, seeds, false, false, /*allow_unused=*/true);
  }

  // sum_k <out_k, grad_out_k> of a forward without recording.
  double objective(const std::vector<Tensor>& ins) {
    NoGradGuard no_grad;
    std::vector<Tensor> outputs = dispatch(def, ins, attrs_from_json(def, row["attrs"]));
    double total = 0;
    for (size_t k = 0; k < row["grad_outputs"].size(); ++k) {
      const json& g = row["grad_outputs"][k];
      if (g.is_null()) continue;
      Tensor out = to(outputs.at(kiln_output(k)), DType::Float64);
      Tensor seed = to(tensor_from_json(g), DType::Float64);
      total += sum(mul(out, seed)).item<double>();
    }
    return total;
  }
};

std::vector<size_t> grad_rows() {
  std::vector<size_t> idx;
  const json& cases = op_refs()["cases"];
  for (size_t i = 0; i < cases.size(); ++i) {
    if (!cases[i].contains("grads")) continue;
    if (op(cases[i]["op"].get<std::string>()).grad == nullptr) continue;
    idx.push_back(i);
  }
  return idx;
}

void expect_grad_close(const Tensor& got, const json& want, double rtol, double atol,
                       const std::string& where) {
  Tensor expected = tensor_from_json(want);
  Tensor g = got.defined() ? got : zeros_like(expected);
  ASSERT_EQ(g.shape(), expected.shape()) << where;
  for (int64_t j = 0; j < g.numel(); ++j) {
    double a = read_element(g, j).to_double(), b = read_element(expected, j).to_double();
    if (std::isnan(b)) {
      ASSERT_TRUE(std::isnan(a)) << where << " at " << j;
      continue;
    }
    if (a == b) continue;  // equal infinities (a pole, an overflow) would give inf - inf = NaN
    ASSERT_LE(std::fabs(a - b), atol + rtol * std::fabs(b))
        << where << " at flat index " << j << ": got " << a << ", want " << b;
  }
}

class OpGradTest : public testing::TestWithParam<size_t> {};

TEST_P(OpGradTest, MatchesPyTorch) {
  const json& row = op_refs()["cases"][GetParam()];
  GradRow r(row);
  for (size_t i : r.wanted)
    requires_grad_(r.inputs[i]);
  std::vector<Tensor> grads = r.backward_grads(r.inputs, std::nullopt);
  // Backward adds more roundings than forward: allow ten times the row's tolerance.
  double rtol = std::max(10 * row["rtol"].get<double>(), 1e-6);
  double atol = std::max(10 * row["atol"].get<double>(), 1e-7);
  for (size_t j = 0; j < r.wanted.size(); ++j) {
    size_t i = r.wanted[j];
    expect_grad_close(grads[j], row["grads"][i], rtol, atol,
                      row["id"].get<std::string>() + " grad of input " + std::to_string(i));
  }
}

TEST_P(OpGradTest, MatchesFiniteDifferences) {
  const json& row = op_refs()["cases"][GetParam()];
  if (!row.value("fd", true)) GTEST_SKIP() << "row opts out of finite differences";
  GradRow r(row);
  std::vector<Tensor> ins;
  for (const Tensor& t : r.inputs) {
    bool widen = t.defined() && t.dtype() == DType::Float32 && !t.impl()->wrapped_number;
    ins.push_back(widen ? clone(to(t, DType::Float64)) : (t.defined() ? clone(t) : t));
    if (t.defined()) ins.back().impl()->wrapped_number = t.impl()->wrapped_number;
  }
  for (size_t i : r.wanted)
    requires_grad_(ins[i]);
  std::vector<Tensor> analytic = r.backward_grads(ins, DType::Float64);
  const double eps = 1e-6, atol = 1e-5, rtol = 1e-3;
  for (size_t j = 0; j < r.wanted.size(); ++j) {
    Tensor x = ins[r.wanted[j]];
    auto* data = x.data<double>();
    int64_t n = x.numel(), stride = std::max<int64_t>(1, n / 32);  // probe up to ~32 elements
    for (int64_t e = 0; e < n; e += stride) {
      double saved = data[e];
      data[e] = saved + eps;
      double up = r.objective(ins);
      data[e] = saved - eps;
      double down = r.objective(ins);
      data[e] = saved;
      double numeric = (up - down) / (2 * eps);
      double got = analytic[j].defined() ? read_element(analytic[j], e).to_double() : 0.0;
      EXPECT_LE(std::fabs(got - numeric), atol + rtol * std::fabs(numeric))
          << row["id"].get<std::string>() << " input " << r.wanted[j] << " element " << e
          << ": backward " << got << ", finite difference " << numeric;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Rows, OpGradTest, testing::ValuesIn(grad_rows()),
                         [](const testing::TestParamInfo<size_t>& info) {
                           return test_name_of(op_refs()["cases"][info.param]["id"]);
                         });

TEST(OpTable, EveryOpWithABackwardRuleHasAGradientRow) {
  std::set<std::string> covered;
  for (size_t i : grad_rows())
    covered.insert(op_refs()["cases"][i]["op"].get<std::string>());
  for (const OpDef* def : op_registry().all()) {
    // custom_function's rule is a registered Function's backward (autograd_function_test.cpp).
    if (def->grad == nullptr || runs_registered_callbacks(*def)) continue;
    EXPECT_TRUE(covered.count(def->name))
        << "op '" << def->name << "' has a backward rule but no gradient row";
  }
}

// Every row PyTorch differentiates must be differentiable in kiln too, so a
// missing rule cannot hide behind grad_rows()'s filter.
TEST(OpTable, EveryOpPyTorchDifferentiatesHasABackwardRule) {
  std::set<std::string> missing;
  for (const json& row : op_refs()["cases"]) {
    if (!row.contains("grads")) continue;
    const std::string name = row["op"];
    if (op(name).grad == nullptr) missing.insert(name);
  }
  EXPECT_TRUE(missing.empty()) << "ops with PyTorch gradient rows but no backward rule: "
                               << ::testing::PrintToString(missing);
}

}  // namespace
}  // namespace kiln
