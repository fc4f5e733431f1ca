// Every differentiable row of the op test table, traced and then trained
// through: a call with inputs that require grad runs the compiled forward
// and its backward is the compiled backward graph (not eager autograd), and
// the gradients equal eager autograd's bit for bit (the default passes keep
// rounding; the backward graph runs the same grad rules' kernels). Inputs
// with other strides are made contiguous first, which may pick another
// kernel (batch-1 linear with a transposed weight): those rows compare within
// float rounding instead.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "jit_test_util.h"
#include "kiln/autograd/autograd.h"
#include "kiln/core/random.h"
#include "kiln/jit/compile/trace.h"
#include "kiln/ops/dispatch.h"
#include "op_refs.h"

namespace kiln::jit {
namespace {

using nlohmann::json;

struct Row {
  const json& row;
  const OpDef& def;
  Attrs attrs;
  std::vector<size_t> wanted;  // inputs with a gradient in the row

  explicit Row(const json& r)
      : row(r), def(op(r["op"].get<std::string>())), attrs(attrs_from_json(def, r["attrs"])) {
    for (size_t i = 0; i < row["inputs"].size(); ++i)
      if (!row["grads"][i].is_null()) wanted.push_back(i);
  }
  std::vector<Tensor> inputs() const {
    std::vector<Tensor> ins;
    for (const json& in : row["inputs"])
      ins.push_back(tensor_from_json(in));
    for (size_t i : wanted)
      requires_grad_(ins[i]);
    return ins;
  }
  size_t kiln_output(size_t k) const {
    return row.contains("compare_outputs") ? row["compare_outputs"][k].get<size_t>() : k;
  }
  // Gradients of sum_k <out_k, seed_k> with respect to the wanted inputs.
  std::vector<Tensor> grads(const std::vector<Tensor>& outputs,
                            const std::vector<Tensor>& ins) const {
    std::vector<Tensor> roots, seeds, leaves;
    for (size_t k = 0; k < row["grad_outputs"].size(); ++k) {
      if (row["grad_outputs"][k].is_null()) continue;
      roots.push_back(outputs.at(kiln_output(k)));
      seeds.push_back(tensor_from_json(row["grad_outputs"][k]));
    }
    for (size_t i : wanted)
      leaves.push_back(ins[i]);
    return grad(roots, leaves, seeds, false, false, /*allow_unused=*/true);
  }
};

testing::AssertionResult close(const Tensor& got, const Tensor& want) {
  if (got.shape() != want.shape()) return testing::AssertionFailure() << "shapes differ";
  for (int64_t i = 0; i < got.numel(); ++i) {
    double a = read_element(got, i).to_double(), b = read_element(want, i).to_double();
    if (std::fabs(a - b) > 1e-6 + 1e-5 * std::fabs(b))
      return testing::AssertionFailure() << "element " << i << ": " << a << " vs " << b;
  }
  return testing::AssertionSuccess();
}

bool is_graph_input(const Tensor& t) {
  return t.defined() && !t.impl()->wrapped_number;
}

class JitGradParity : public testing::TestWithParam<size_t> {};

TEST_P(JitGradParity, CompiledBackwardEqualsEager) {
  Row r(op_refs()["cases"][GetParam()]);
  manual_seed(7);
  std::vector<Tensor> eager_inputs = r.inputs();
  std::vector<Tensor> expected = r.grads(dispatch(r.def, eager_inputs, r.attrs), eager_inputs);

  std::vector<Tensor> traced_with = r.inputs();
  std::vector<Tensor> graph_inputs;
  for (const Tensor& t : traced_with)
    if (is_graph_input(t)) graph_inputs.push_back(t);
  auto fn = [&](const std::vector<Tensor>& in) {
    std::vector<Tensor> all = traced_with;
    for (size_t i = 0, k = 0; i < all.size(); ++i)
      if (is_graph_input(all[i])) all[i] = in[k++];
    return dispatch(r.def, all, r.attrs);
  };
  CapturedWarnings captured;
  CompiledFunction f = trace(fn, graph_inputs);

  std::vector<Tensor> ins = r.inputs(), call_inputs;
  for (const Tensor& t : ins)
    if (is_graph_input(t)) call_inputs.push_back(t);
  ASSERT_NE(f.grad_plan(call_inputs), nullptr) << r.row["id"] << ": not differentiable as a graph";
  manual_seed(7);
  std::vector<Tensor> outputs = f(call_inputs);
  for (size_t k = 0; k < r.row["grad_outputs"].size(); ++k) {
    if (r.row["grad_outputs"][k].is_null()) continue;
    EXPECT_EQ(grad_fn_name(outputs.at(r.kiln_output(k))), "CompiledFunctionBackward");
  }
  std::vector<Tensor> got = r.grads(outputs, ins);
  bool strided = std::any_of(call_inputs.begin(), call_inputs.end(),
                             [](const Tensor& t) { return !t.is_contiguous(); });
  ASSERT_EQ(got.size(), expected.size());
  for (size_t j = 0; j < got.size(); ++j) {
    ASSERT_EQ(got[j].defined(), expected[j].defined()) << r.row["id"] << " input " << r.wanted[j];
    if (!got[j].defined()) continue;
    if (strided) {
      EXPECT_TRUE(close(got[j], expected[j])) << r.row["id"] << " input " << r.wanted[j];
      continue;
    }
    EXPECT_TRUE(bitwise_equal(got[j], expected[j])) << r.row["id"] << " input " << r.wanted[j];
  }
}

std::vector<size_t> grad_rows() {
  std::vector<size_t> idx;
  const json& cases = op_refs()["cases"];
  for (size_t i = 0; i < cases.size(); ++i) {
    if (!cases[i].contains("grads") || cases[i].contains("error")) continue;
    if (op(cases[i]["op"].get<std::string>()).grad == nullptr) continue;
    idx.push_back(i);
  }
  return idx;
}

INSTANTIATE_TEST_SUITE_P(Rows, JitGradParity, testing::ValuesIn(grad_rows()),
                         [](const testing::TestParamInfo<size_t>& info) {
                           return test_name_of(op_refs()["cases"][info.param]["id"]);
                         });

}  // namespace
}  // namespace kiln::jit
