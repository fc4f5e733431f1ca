// cpu::lstm_recurrent_scan_f32 (kernels/cpu/rnn.h), the fused batch-1 LSTM
// layer: bit for bit what a batched layer computes for one row (kiln's GEMM
// for h W_hhᵀ + b_hh, then lstm_cell_pointwise), and close to a float64
// loop, over hidden sizes that leave every block remainder (1 .. 15 units
// past a multiple of 16), one and two K blocks of the GEMM, with and
// without a bias, forwards and in reverse, on one thread and on two.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kiln/kernels/cpu/gemm_f32.h"
#include "kiln/kernels/cpu/parallel.h"
#include "kiln/kernels/cpu/rnn.h"

namespace kiln::cpu {
namespace {

struct Layer {
  int64_t hidden, steps;
  bool bias, reverse;
  std::vector<float> w, b, gi, h0, c0;

  Layer(int64_t hidden_, int64_t steps_, bool bias_, bool reverse_)
      : hidden(hidden_), steps(steps_), bias(bias_), reverse(reverse_) {
    std::mt19937 rng(uint32_t(hidden * 31 + steps));
    std::uniform_real_distribution<float> weight(-0.3f, 0.3f), value(-2.0f, 2.0f);
    auto fill = [&](std::vector<float>& v, size_t n, auto& dist) {
      v.resize(n);
      for (float& e : v)
        e = dist(rng);
    };
    const size_t G = size_t(4 * hidden), H = size_t(hidden);
    fill(w, G * H, weight);
    fill(b, G, weight);
    fill(gi, size_t(steps) * G, value);
    fill(h0, H, value);
    fill(c0, H, value);
  }

  int64_t step_at(int64_t s) const { return reverse ? steps - 1 - s : s; }
};

// ys [steps, H], then h_n, then c_n: one vector.
using Result = std::vector<float>;

Result fused(const Layer& l) {
  const int64_t H = l.hidden;
  LstmRecurrentWeights packed;
  packed.pack(l.w.data(), H, H, H);
  Result out(static_cast<size_t>((l.steps + 2) * H), -1.0f);
  float* h_n = out.data() + l.steps * H;
  lstm_recurrent_scan_f32(packed, LstmScanArgs{.gi = l.gi.data(),
                                               .gi_step = 4 * H,
                                               .ys = out.data(),
                                               .ys_step = H,
                                               .h0 = l.h0.data(),
                                               .c0 = l.c0.data(),
                                               .b_hh = l.bias ? l.b.data() : nullptr,
                                               .h_n = h_n,
                                               .c_n = h_n + H,
                                               .steps = l.steps,
                                               .reverse = l.reverse});
  return out;
}

// A batched layer's arithmetic on one row: gemm_f32, then the cell kernel.
Result batched_row(const Layer& l) {
  const int64_t H = l.hidden, G = 4 * H;
  Result out(static_cast<size_t>((l.steps + 2) * H));
  std::vector<float> h = l.h0, c = l.c0;
  std::vector<float> gh(static_cast<size_t>(G)), c_next(static_cast<size_t>(H));
  for (int64_t s = 0; s < l.steps; ++s) {
    const int64_t t = l.step_at(s);
    gemm_f32(GemmRows{gh.data(), G, h.data(), H, l.bias ? l.b.data() : nullptr, 1},
             GemmB{l.w.data(), H, G, 1, H});
    lstm_cell_pointwise(l.gi.data() + t * G, gh.data(), c.data(), h.data(), c_next.data(), 1, H);
    std::copy(h.begin(), h.end(), out.begin() + t * H);
    std::swap(c, c_next);
  }
  std::copy(h.begin(), h.end(), out.begin() + l.steps * H);
  std::copy(c.begin(), c.end(), out.begin() + (l.steps + 1) * H);
  return out;
}

// The same in float64, with plain loops and lstm_cell_pointwise<double>.
std::vector<double> float64_layer(const Layer& l) {
  const int64_t H = l.hidden, G = 4 * H;
  std::vector<double> out(static_cast<size_t>((l.steps + 2) * H));
  std::vector<double> h(l.h0.begin(), l.h0.end()), c(l.c0.begin(), l.c0.end());
  std::vector<double> gi(static_cast<size_t>(G)), gh(static_cast<size_t>(G));
  std::vector<double> c_next(static_cast<size_t>(H));
  for (int64_t s = 0; s < l.steps; ++s) {
    const int64_t t = l.step_at(s);
    for (int64_t g = 0; g < G; ++g) {
      double sum = l.bias ? double(l.b[size_t(g)]) : 0.0;
      for (int64_t k = 0; k < H; ++k)
        sum += double(l.w[size_t(g * H + k)]) * h[size_t(k)];
      gh[size_t(g)] = sum;
      gi[size_t(g)] = l.gi[size_t(t * G + g)];
    }
    lstm_cell_pointwise(gi.data(), gh.data(), c.data(), h.data(), c_next.data(), 1, H);
    std::copy(h.begin(), h.end(), out.begin() + t * H);
    std::swap(c, c_next);
  }
  std::copy(h.begin(), h.end(), out.begin() + l.steps * H);
  std::copy(c.begin(), c.end(), out.begin() + (l.steps + 1) * H);
  return out;
}

class LstmRecurrent : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    threads_before_ = max_threads();
    set_num_threads(GetParam());
  }
  void TearDown() override { set_num_threads(threads_before_); }
  int threads_before_ = 1;
};

TEST_P(LstmRecurrent, EqualsTheBatchedRowBitForBitAndFloat64Closely) {
  // 300: K = 300 takes two K blocks in gemm_f32; 130 and up split the
  // blocks between two threads.
  for (int64_t hidden : {1, 5, 8, 13, 16, 17, 40, 130, 300}) {
    for (int64_t steps : {1, 2, 7}) {
      for (bool bias : {true, false}) {
        for (bool reverse : {false, true}) {
          const Layer layer(hidden, steps, bias, reverse);
          const Result got = fused(layer), want = batched_row(layer);
          const std::vector<double> exact = float64_layer(layer);
          SCOPED_TRACE(testing::Message()
                       << "H " << hidden << ", " << steps << " steps" << (bias ? "" : ", no bias")
                       << (reverse ? ", reverse" : ""));
          ASSERT_EQ(got.size(), want.size());
          for (size_t i = 0; i < got.size(); ++i) {
            ASSERT_EQ(got[i], want[i]) << "element " << i;
            ASSERT_NEAR(got[i], exact[i], 1e-4 * (1 + std::abs(exact[i]))) << "element " << i;
          }
        }
      }
    }
  }
}

TEST_P(LstmRecurrent, NoStepsPassesTheStateThrough) {
  const Layer layer(13, 0, true, false);
  const Result got = fused(layer);
  EXPECT_EQ(Result(got.begin(), got.begin() + 13), layer.h0);
  EXPECT_EQ(Result(got.begin() + 13, got.end()), layer.c0);
}

// Packing again into the same object (a new weight, a smaller layer) leaves
// nothing of the last packing behind.
TEST_P(LstmRecurrent, RepackingReplacesTheWeights) {
  const Layer big(40, 3, true, false), small(17, 3, true, false);
  LstmRecurrentWeights packed;
  packed.pack(big.w.data(), 40, 40, 40);
  packed.pack(small.w.data(), 17, 17, 17);
  Result out(static_cast<size_t>(5 * 17));
  float* h_n = out.data() + 3 * 17;
  lstm_recurrent_scan_f32(packed, LstmScanArgs{.gi = small.gi.data(),
                                               .gi_step = 4 * 17,
                                               .ys = out.data(),
                                               .ys_step = 17,
                                               .h0 = small.h0.data(),
                                               .c0 = small.c0.data(),
                                               .b_hh = small.b.data(),
                                               .h_n = h_n,
                                               .c_n = h_n + 17,
                                               .steps = 3});
  EXPECT_EQ(out, batched_row(small));
}

INSTANTIATE_TEST_SUITE_P(Threads, LstmRecurrent, ::testing::Values(1, 2),
                         [](const auto& info) { return std::to_string(info.param) + "Threads"; });

}  // namespace
}  // namespace kiln::cpu
