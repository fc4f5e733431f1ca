// einsum against a reference that loops over every assignment of the labels
// (forward), against finite differences of that reference (gradients), and
// traced (the composition records as ordinary ops). The Python tests compare
// it with torch.einsum itself (tests/python/test_tensor_sort_scan.py).
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "jit_test_util.h"
#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
#include "kiln/core/random.h"
#include "kiln/jit/compile/trace.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/einsum.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"
#include "test_util.h"

namespace kiln {
namespace {

struct LetterEquation {
  std::vector<std::string> inputs;
  std::string output;
};

// "ij,jk->ik": letters only, explicit output.
LetterEquation split(const std::string& equation) {
  LetterEquation eq;
  const size_t arrow = equation.find("->");
  eq.output = equation.substr(arrow + 2);
  std::string term;
  for (char c : equation.substr(0, arrow)) {
    if (c == ',') {
      eq.inputs.push_back(term);
      term.clear();
    } else {
      term += c;
    }
  }
  eq.inputs.push_back(term);
  return eq;
}

// sum over every assignment of the labels of the product of the operands'
// elements there (a size-1 dim broadcasts); float64.
Tensor reference(const std::string& letter_equation, const std::vector<Tensor>& operands) {
  const LetterEquation eq = split(letter_equation);
  std::map<char, int64_t> sizes;
  std::vector<std::vector<double>> data;
  for (size_t i = 0; i < operands.size(); ++i) {
    data.push_back(contiguous(to(operands[i], DType::Float64)).to_vector<double>());
    for (size_t d = 0; d < eq.inputs[i].size(); ++d) {
      int64_t& size = sizes[eq.inputs[i][d]];
      size = std::max(size, operands[i].shape()[d]);
    }
  }
  std::vector<char> letters;
  for (const auto& [letter, size] : sizes)
    letters.push_back(letter);
  IntList out_shape;
  for (char c : eq.output)
    out_shape.push_back(sizes[c]);
  std::vector<double> out(size_t(numel_of(out_shape)), 0.0);
  std::map<char, int64_t> at;
  for (char c : letters)
    at[c] = 0;
  const int64_t assignments = [&] {
    int64_t n = 1;
    for (char c : letters)
      n *= sizes[c];
    return n;
  }();
  for (int64_t a = 0; a < assignments; ++a) {
    int64_t rest = a;
    for (char c : letters) {
      at[c] = rest % sizes[c];
      rest /= sizes[c];
    }
    double product = 1;
    for (size_t i = 0; i < operands.size(); ++i) {
      int64_t offset = 0;
      for (size_t d = 0; d < eq.inputs[i].size(); ++d) {
        const int64_t size = operands[i].shape()[d];
        offset = offset * size + (size == 1 ? 0 : at[eq.inputs[i][d]]);
      }
      product *= data[i][size_t(offset)];
    }
    int64_t out_offset = 0;
    for (char c : eq.output)
      out_offset = out_offset * sizes[c] + at[c];
    out[size_t(out_offset)] += product;
  }
  return tensor_from_data(out.data(), DType::Float64, out_shape, DType::Float64);
}

struct EinsumCase {
  std::string equation;         // as torch.einsum takes it
  std::string letter_equation;  // the same with letters only, for the reference
  std::vector<IntList> shapes;
};

const std::vector<EinsumCase> kCases = {
    {"ij,jk->ik", "ij,jk->ik", {{3, 4}, {4, 5}}},
    {"bij,bjk->bik", "bij,bjk->bik", {{2, 3, 4}, {2, 4, 2}}},
    {"i,j->ij", "i,j->ij", {{3}, {4}}},
    {"i,i->", "i,i->", {{5}, {5}}},
    {"ij->ji", "ij->ji", {{2, 3}}},
    {"ij->", "ij->", {{2, 3}}},
    {"ij", "ij->ij", {{2, 3}}},
    {"ji", "ji->ij", {{2, 3}}},
    {"ii->", "ii->", {{4, 4}}},
    {"ii->i", "ii->i", {{4, 4}}},
    {"iij->ji", "iij->ji", {{3, 3, 2}}},
    {"bn,anm,bm->ba", "bn,anm,bm->ba", {{2, 3}, {4, 3, 5}, {2, 5}}},
    {"ij,jk,kl->il", "ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 2}}},
    {"...ij,...jk->...ik", "xij,xjk->xik", {{2, 3, 4}, {2, 4, 5}}},
    {"...ij,...jk", "xyij,yjk->xyik", {{2, 3, 2, 4}, {3, 4, 2}}},
    {"...i,...i", "xyi,yi->xy", {{4, 2, 3}, {2, 3}}},
    {"b...,b...->b", "bxy,bxy->b", {{2, 3, 4}, {2, 3, 4}}},
    {"ij,ij->ij", "ij,ij->ij", {{2, 1}, {2, 3}}},
    {"ij,jk->ik", "ij,jk->ik", {{2, 1}, {3, 4}}},
    {"i j -> j i", "ij->ji", {{3, 2}}},
    {"bA", "bA->Ab", {{2, 3}}},
    {",i->i", ",i->i", {{}, {3}}},
    {"ij,jk->ik", "ij,jk->ik", {{2, 0}, {0, 3}}},
};

std::vector<Tensor> inputs_of(const EinsumCase& c, DType dtype, uint64_t seed) {
  manual_seed(seed);
  std::vector<Tensor> inputs;
  for (const IntList& shape : c.shapes)
    inputs.push_back(randn(shape, dtype));
  return inputs;
}

void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& where) {
  ASSERT_EQ(got.shape(), want.shape()) << where;
  const std::vector<double> g = contiguous(to(got, DType::Float64)).to_vector<double>();
  const std::vector<double> w = contiguous(want).to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_NEAR(g[i], w[i], tol * (1 + std::fabs(w[i]))) << where << " at " << i;
}

TEST(Einsum, MatchesTheReference) {
  for (const EinsumCase& c : kCases) {
    for (DType dtype : {DType::Float32, DType::Float64}) {
      const std::vector<Tensor> inputs = inputs_of(c, dtype, 1);
      const Tensor got = einsum(c.equation, inputs);
      EXPECT_EQ(got.dtype(), dtype) << c.equation;
      expect_close(got, reference(c.letter_equation, inputs),
                   dtype == DType::Float32 ? 1e-5 : 1e-12, c.equation);
    }
  }
}

TEST(Einsum, IntegerOperands) {
  const Tensor a = tensor({{1, 2}, {3, 4}}), b = tensor({{5, 6}, {7, 8}});
  const Tensor got = einsum("ij,jk->ik", {a, b});
  EXPECT_EQ(got.dtype(), DType::Int64);
  EXPECT_EQ(got.to_vector<int64_t>(), (std::vector<int64_t>{19, 22, 43, 50}));
  EXPECT_EQ(einsum("ii", {a}).item<int64_t>(), 5);
}

// Gradients of <einsum(...), w> against central differences of the reference.
TEST(Einsum, GradientsMatchFiniteDifferences) {
  for (const EinsumCase& c : kCases) {
    std::vector<Tensor> inputs = inputs_of(c, DType::Float64, 2);
    for (Tensor& t : inputs)
      requires_grad_(t);
    const Tensor out = einsum(c.equation, inputs);
    const Tensor w = randn(out.shape(), DType::Float64);
    const std::vector<Tensor> grads = grad({sum(out * w)}, inputs, {}, false, false, true);
    for (size_t i = 0; i < inputs.size(); ++i) {
      std::vector<Tensor> probe;
      for (const Tensor& t : inputs)
        probe.push_back(clone(detach(t)));
      double* data = probe[i].data<double>();
      for (int64_t e = 0; e < probe[i].numel(); ++e) {
        const double saved = data[e], eps = 1e-6;
        data[e] = saved + eps;
        const double up = sum(reference(c.letter_equation, probe) * w).item<double>();
        data[e] = saved - eps;
        const double down = sum(reference(c.letter_equation, probe) * w).item<double>();
        data[e] = saved;
        const double got =
            grads[i].defined() ? contiguous(grads[i]).to_vector<double>()[size_t(e)] : 0.0;
        EXPECT_NEAR(got, (up - down) / (2 * eps), 1e-6) << c.equation << " operand " << i;
      }
    }
  }
}

TEST(Einsum, TracedGraphGivesTheEagerValues) {
  for (const EinsumCase& c : kCases) {
    const std::vector<Tensor> inputs = inputs_of(c, DType::Float32, 3);
    const Tensor eager = einsum(c.equation, inputs);
    jit::CompiledFunction f = jit::trace(
        [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{einsum(c.equation, in)}; },
        inputs);
    const std::vector<Tensor> compiled = f(inputs_of(c, DType::Float32, 3));
    ASSERT_EQ(compiled.size(), 1u);
    EXPECT_TRUE(jit::same_bits(compiled[0], eager)) << c.equation;
  }
}

TEST(Einsum, RefusesBadEquations) {
  const Tensor m = randn({3, 3}), v = randn({3});
  EXPECT_THROW_WITH(einsum("i.j", {m}), "found '.' for operand 0 that is not part of any ellipsis");
  EXPECT_THROW_WITH(einsum("...i...", {m}), "for which an ellipsis was already found");
  EXPECT_THROW_WITH(einsum("ij->i->j", {m}), "invalid subscript given at index 5");
  EXPECT_THROW_WITH(einsum("i1", {m}), "invalid subscript given at index 1");
  EXPECT_THROW_WITH(einsum("i,i", {v}), "fewer operands were provided than specified");
  EXPECT_THROW_WITH(einsum("ij", {m, v}), "more operands were provided than specified");
  EXPECT_THROW_WITH(einsum("ij->ii", {m}), "output subscript i appears more than once");
  EXPECT_THROW_WITH(einsum("ij->k", {m}), "output subscript k does not appear in the equation");
  EXPECT_THROW_WITH(einsum("ijk", {m}),
                    "the number of subscripts in the equation (3) does not match the number of "
                    "dimensions (2) for operand 0 and no ellipsis was given");
  EXPECT_THROW_WITH(einsum("ijk...", {m}), "is more than the number of dimensions (2)");
  EXPECT_THROW_WITH(einsum("ii", {randn({3, 4})}),
                    "subscript i is repeated for operand 0 but the sizes don't match, 4 != 3");
  EXPECT_THROW_WITH(einsum("ij,jk", {m, randn({4, 2})}),
                    "subscript j has size 4 for operand 1 which does not broadcast with "
                    "previously seen size 3");
  EXPECT_THROW_WITH(einsum("i,i", {v, tensor({1, 2, 3})}),
                    "expected all operands to have the same dtype");
  EXPECT_THROW_WITH(einsum("i", {}), "must provide at least one operand");
}

}  // namespace
}  // namespace kiln
