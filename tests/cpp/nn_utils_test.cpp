// kiln::nn::utils from C++ training code: clipping by norm checked against
// the norm recomputed on the host, and the recurrent layers on a packed
// batch checked against running each sequence alone (the PyTorch
// comparisons are tests/python/test_nn_utils.py).
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
#include "kiln/core/random.h"
#include "kiln/nn/grad_utils.h"
#include "kiln/nn/rnn.h"
#include "kiln/nn/rnn_packed.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/view.h"

namespace kiln {
namespace {

namespace U = nn::utils;
namespace R = nn::utils::rnn;
namespace F = nn::functional;

// sqrt(sum of g^2) over every gradient, on the host.
double host_l2(const std::vector<Tensor>& params) {
  double total = 0;
  for (const Tensor& p : params) {
    for (float g : grad(p).to_vector<float>())
      total += double(g) * g;
  }
  return std::sqrt(total);
}

TEST(NnUtils, ClipGradNormScalesTheGradientsToMaxNorm) {
  manual_seed(0);
  std::vector<Tensor> params{requires_grad_(randn({3, 4})), requires_grad_(randn({5})),
                             requires_grad_(randn({2}))};
  backward(sum(params[0] * params[0]) * 3.0 + sum(params[1] * params[1]));  // params[2]: no grad
  const double before = host_l2({params[0], params[1]});
  ASSERT_GT(before, 1.0);
  Tensor norm = U::clip_grad_norm_(params, 1.0);
  EXPECT_NEAR(norm.item<double>(), before, 1e-4 * before);
  EXPECT_NEAR(host_l2({params[0], params[1]}), 1.0, 1e-5);
  EXPECT_FALSE(grad(params[2]).defined());
  // Below max_norm nothing changes; the inf norm is the largest |g|.
  Tensor inf_norm = U::clip_grad_norm_(params, 10.0, INFINITY);
  EXPECT_FLOAT_EQ(
      inf_norm.item<float>(),
      max(abs(cat({reshape(grad(params[0]), IntList{-1}), grad(params[1])}))).item<float>());
  EXPECT_NEAR(host_l2({params[0], params[1]}), 1.0, 1e-5);
}

TEST(NnUtils, PackedLayersEqualEachSequenceRunAlone) {
  manual_seed(1);
  const int64_t in = 3, hidden = 4;
  std::vector<Tensor> weights;
  for (int d = 0; d < 2; ++d) {  // one bidirectional LSTM layer
    for (IntList shape : {IntList{4 * hidden, in}, IntList{4 * hidden, hidden}, IntList{4 * hidden},
                          IntList{4 * hidden}})
      weights.push_back(randn(shape) * 0.5);
  }
  const F::RNNOptions options{.bidirectional = true};
  const IntList lengths{2, 5, 3};
  std::vector<Tensor> sequences;
  for (int64_t length : lengths)
    sequences.push_back(randn({length, in}));
  R::PackedSequence packed = R::pack_sequence(sequences, /*enforce_sorted=*/false);
  R::PackedRNNResult result =
      R::recurrent_packed(F::RNNMode::LSTM, packed, {}, {}, weights, options);
  std::vector<Tensor> outputs = R::unpack_sequence(result.output);

  for (size_t b = 0; b < sequences.size(); ++b) {
    F::RNNResult alone =
        F::recurrent(F::RNNMode::LSTM, unsqueeze(sequences[b], 1), {}, {}, weights, options);
    auto expect_close = [](const Tensor& got, const Tensor& want) {
      ASSERT_EQ(got.shape(), want.shape());
      std::vector<float> g = contiguous(got).to_vector<float>(),
                         w = contiguous(want).to_vector<float>();
      for (size_t i = 0; i < g.size(); ++i)
        EXPECT_NEAR(g[i], w[i], 1e-5) << "element " << i;
    };
    expect_close(outputs[b], squeeze(alone.output, 1));
    expect_close(select(result.h_n, 1, int64_t(b)), squeeze(alone.h_n, 1));
    expect_close(select(result.c_n, 1, int64_t(b)), squeeze(alone.c_n, 1));
  }
}

}  // namespace
}  // namespace kiln
