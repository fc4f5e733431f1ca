// Eager products keep the packed form of a weight they see again (Note
// [Eager packed weights], ops/packed_weights.cpp): the same bits as packing
// per call, writes seen through the version counter, entries gone with their
// storage, and several threads reading one weight at once.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "kiln/core/factory.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/packed_weights.h"
#include "kiln/ops/random.h"

namespace kiln {
namespace {

constexpr int64_t kLimit = int64_t(64) << 20;

class PackedWeightsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    set_eager_weight_cache_limit(kLimit);
    clear_eager_weight_cache();
  }
  void TearDown() override { set_eager_weight_cache_limit(kLimit); }

  // What packing per call gives.
  static Tensor uncached(const Tensor& x, const Tensor& w) {
    set_eager_weight_cache_limit(0);
    Tensor y = linear(x, w);
    set_eager_weight_cache_limit(kLimit);
    return y;
  }
};

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.to_vector<float>() == b.to_vector<float>();
}

TEST_F(PackedWeightsTest, ASecondSightPacksAndAThirdReuses) {
  Tensor x = randn({32, 128}), w = randn({128, 128});
  const EagerWeightCacheStats before = eager_weight_cache_stats();
  std::vector<Tensor> ys;
  for (int i = 0; i < 3; ++i)
    ys.push_back(linear(x, w));
  const EagerWeightCacheStats after = eager_weight_cache_stats();
  EXPECT_EQ(after.packs - before.packs, 1);
  EXPECT_EQ(after.hits - before.hits, 1);
  EXPECT_EQ(after.bytes, 128 * 128 * 4);
  for (const Tensor& y : ys)
    EXPECT_TRUE(same_bits(y, uncached(x, w)));
}

TEST_F(PackedWeightsTest, AnInPlaceWriteIsSeen) {
  Tensor x = randn({32, 128}), w = randn({128, 128});
  linear(x, w), linear(x, w), linear(x, w);
  add_(w, Scalar(1.0));
  EXPECT_TRUE(same_bits(linear(x, w), uncached(x, w)));
  mul_(w, Scalar(-2.0));
  linear(x, w);
  EXPECT_TRUE(same_bits(linear(x, w), uncached(x, w)));
}

TEST_F(PackedWeightsTest, AFreedStorageTakesItsEntriesAndCopies) {
  Tensor x = randn({32, 128});
  const int64_t entries = eager_weight_cache_stats().entries;
  {
    Tensor w = randn({128, 128});
    linear(x, w), linear(x, w);
    EXPECT_EQ(eager_weight_cache_stats().entries, entries + 1);
    EXPECT_GT(eager_weight_cache_stats().bytes, 0);
  }
  EXPECT_EQ(eager_weight_cache_stats().entries, entries);
  EXPECT_EQ(eager_weight_cache_stats().bytes, 0);
}

TEST_F(PackedWeightsTest, ThreadsReadingOneWeightAtOnceGetItsBits) {
  Tensor w = randn({256, 256});
  std::vector<Tensor> xs, want;
  for (int t = 0; t < 4; ++t) {
    xs.push_back(randn({48, 256}));
    want.push_back(uncached(xs.back(), w));
  }
  std::vector<int> wrong(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        if (!same_bits(linear(xs[size_t(t)], w), want[size_t(t)])) ++wrong[size_t(t)];
        if (i % 7 == 6) clear_eager_weight_cache();  // drops copies others may be reading
      }
    });
  }
  for (std::thread& thread : threads)
    thread.join();
  for (int t = 0; t < 4; ++t)
    EXPECT_EQ(wrong[size_t(t)], 0) << "thread " << t;
  EXPECT_GT(eager_weight_cache_stats().hits, 0);
}

}  // namespace
}  // namespace kiln
