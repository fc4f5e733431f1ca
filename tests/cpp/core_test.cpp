#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kiln/core/allocator.h"
#include "kiln/core/element_cast.h"
#include "kiln/core/factory.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/random.h"

namespace kiln {
namespace {

TEST(DType, PromotionFollowsPyTorch) {
  EXPECT_EQ(promote_types(DType::Int32, DType::Float32), DType::Float32);
  EXPECT_EQ(promote_types(DType::Int32, DType::Int64), DType::Int64);
  EXPECT_EQ(promote_types(DType::Bool, DType::Int32), DType::Int32);
  EXPECT_EQ(promote_types(DType::Float32, DType::Float64), DType::Float64);
  EXPECT_EQ(promote_types(DType::Int64, DType::Float32), DType::Float32);
  // The small integer types (the whole table is checked against
  // torch.promote_types in tests/python/test_small_int_dtypes.py).
  EXPECT_EQ(promote_types(DType::UInt8, DType::Int8), DType::Int16);
  EXPECT_EQ(promote_types(DType::Int8, DType::UInt8), DType::Int16);
  EXPECT_EQ(promote_types(DType::UInt8, DType::Int16), DType::Int16);
  EXPECT_EQ(promote_types(DType::UInt8, DType::Int32), DType::Int32);
  EXPECT_EQ(promote_types(DType::Bool, DType::UInt8), DType::UInt8);
  EXPECT_EQ(promote_types(DType::Int8, DType::Int16), DType::Int16);
  EXPECT_EQ(promote_types(DType::Int16, DType::Float32), DType::Float32);
  EXPECT_EQ(element_size(DType::Int16), 2u);
  EXPECT_EQ(dtype_from_string("uint8"), DType::UInt8);
}

TEST(DType, ElementCastFromFloatsIsDefinedOutOfRange) {
  // In range: truncation toward zero; a narrower type keeps the low bits of
  // the int32 conversion, which gives INT32_MIN for NaN and out-of-range values.
  EXPECT_EQ(element_cast<uint8_t>(-1.5f), uint8_t(255));
  EXPECT_EQ(element_cast<int8_t>(200.7), int8_t(200 - 256));
  EXPECT_EQ(element_cast<int16_t>(std::nanf("")), int16_t(0));
  EXPECT_EQ(element_cast<int32_t>(3e9f), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(element_cast<int64_t>(3e9f), int64_t(3000000000));
  EXPECT_EQ(element_cast<int64_t>(1e30), std::numeric_limits<int64_t>::min());
}

TEST(DType, ScalarsAndZeroDimTensorsOnlyPromoteAcrossCategories) {
  ResultTypeState int_plus_float_number;
  int_plus_float_number.add_tensor(DType::Int32, false);
  int_plus_float_number.add_wrapped_number(DType::Float64);
  EXPECT_EQ(int_plus_float_number.result(), DType::Float32);

  ResultTypeState int32_plus_int_number;
  int32_plus_int_number.add_tensor(DType::Int32, false);
  int32_plus_int_number.add_wrapped_number(DType::Int64);
  EXPECT_EQ(int32_plus_int_number.result(), DType::Int32);

  ResultTypeState f32_plus_f64_zero_dim;
  f32_plus_f64_zero_dim.add_tensor(DType::Float32, false);
  f32_plus_f64_zero_dim.add_tensor(DType::Float64, true);
  EXPECT_EQ(f32_plus_f64_zero_dim.result(), DType::Float32);

  ResultTypeState int_plus_f64_zero_dim;
  int_plus_f64_zero_dim.add_tensor(DType::Int64, false);
  int_plus_f64_zero_dim.add_tensor(DType::Float64, true);
  EXPECT_EQ(int_plus_f64_zero_dim.result(), DType::Float64);

  ResultTypeState bool_plus_int_number;
  bool_plus_int_number.add_tensor(DType::Bool, false);
  bool_plus_int_number.add_wrapped_number(DType::Int64);
  EXPECT_EQ(bool_plus_int_number.result(), DType::Int64);
}

TEST(Allocator, AlignsAndCountsLiveBytes) {
  int64_t before = allocator_stats().live_bytes;
  {
    Tensor t = empty({3, 5});
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % kAlignment, 0u);
    EXPECT_EQ(allocator_stats().live_bytes, before + 60);
  }
  EXPECT_EQ(allocator_stats().live_bytes, before);
}

TEST(Allocator, ReusesFreedLargeBlocksOfTheSameSize) {
  release_cached_blocks();
  const int64_t live = allocator_stats().live_bytes;
  void* first = nullptr;
  {
    Tensor big = empty({1 << 16});  // 256 KiB: cached when freed
    first = big.data_ptr();
  }
  EXPECT_GE(allocator_stats().cached_bytes, int64_t(1) << 18);
  EXPECT_EQ(allocator_stats().live_bytes, live) << "a cached block is not live";
  const int64_t hits = allocator_stats().cache_hits;
  Tensor again = empty({1 << 16});
  EXPECT_EQ(again.data_ptr(), first);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(again.data_ptr()) % kAlignment, 0u);
  EXPECT_EQ(allocator_stats().cache_hits, hits + 1);
  Tensor other = empty({(1 << 16) + 16});  // another size: not that block
  EXPECT_NE(other.data_ptr(), first);
  again = Tensor();
  other = Tensor();
  release_cached_blocks();
  EXPECT_EQ(allocator_stats().cached_bytes, 0);
  { Tensor small = empty({4}); }
  EXPECT_EQ(allocator_stats().cached_bytes, 0) << "small blocks are not counted there";
}

// A thread keeps the small blocks it frees, a few of each size, and hands
// them out again newest first; the rest go back to the C library.
TEST(Allocator, KeepsAFewFreedSmallBlocksPerThread) {
  release_cached_blocks();  // this thread's small blocks too
  const int64_t live = allocator_stats().live_bytes;
  std::vector<void*> freed;
  {
    std::vector<Tensor> tensors;
    for (int i = 0; i < 9; ++i) {
      tensors.push_back(empty({12}));  // 48 bytes: a 64-byte block
      freed.push_back(tensors.back().data_ptr());
    }
  }  // freed first to last: the first 8 are kept, the 9th goes back
  EXPECT_EQ(allocator_stats().live_bytes, live);
  EXPECT_EQ(allocator_stats().cached_bytes, 0) << "small blocks are not counted there";
  std::vector<Tensor> again;
  for (int i = 7; i >= 0; --i) {
    again.push_back(empty({3, 5}));  // 60 bytes: the same size of block
    EXPECT_EQ(again.back().data_ptr(), freed[size_t(i)]) << "kept block " << i;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(again.back().data_ptr()) % kAlignment, 0u);
  }
}

TEST(Factory, FillsValues) {
  EXPECT_EQ(zeros({2, 2}).to_vector<float>(), std::vector<float>(4, 0.f));
  EXPECT_EQ(ones({3}, DType::Int32).to_vector<int32_t>(), std::vector<int32_t>(3, 1));
  EXPECT_EQ(full({2}, 2.5).to_vector<float>(), std::vector<float>(2, 2.5f));
  EXPECT_EQ(arange(5).dtype(), DType::Int64);
  EXPECT_EQ(arange(5).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(0.0, 1.0, 0.25).to_vector<float>(), (std::vector<float>{0, .25f, .5f, .75f}));
  EXPECT_EQ(linspace(0, 1, 5).to_vector<float>(), (std::vector<float>{0, .25f, .5f, .75f, 1}));
  EXPECT_EQ(eye(2, 3).to_vector<float>(), (std::vector<float>{1, 0, 0, 0, 1, 0}));
  Tensor t = tensor({{1, 2, 3}, {4, 5, 6}});
  EXPECT_EQ(t.shape(), (IntList{2, 3}));
  EXPECT_EQ(t.dtype(), DType::Int64);
  EXPECT_EQ(tensor({1.5, 2.5}).dtype(), DType::Float32);
  EXPECT_EQ(tensor({true, false}).dtype(), DType::Bool);
  EXPECT_EQ(tensor({{{1.f}, {2.f}}}).shape(), (IntList{1, 2, 1}));
  EXPECT_EQ(zeros_like(t).shape(), t.shape());
}

TEST(Factory, RejectsBadInput) {
  EXPECT_THROW(zeros({2, -1}), Error);
  EXPECT_THROW(randint(3, 3, {2}), Error);
  EXPECT_THROW(arange(0, 5, 0), Error);
  EXPECT_THROW(arange(5, 0, 1), Error);
  EXPECT_THROW(rand({2}, DType::Int64), Error);
  EXPECT_THROW((tensor({{1, 2}, {3}})), Error);
  try {
    zeros({2, -1});
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[2, -1]"), std::string::npos) << e.what();
  }
}

TEST(Random, SeedFixesTheStream) {
  manual_seed(42);
  auto a = randn({100}).to_vector<float>();
  auto u = rand({100}).to_vector<float>();
  manual_seed(42);
  EXPECT_EQ(randn({100}).to_vector<float>(), a);
  EXPECT_EQ(rand({100}).to_vector<float>(), u);
  EXPECT_NE(randn({100}).to_vector<float>(), a);
}

TEST(Random, PhiloxMatchesTheKnownAnswer) {
  // Known-answer vector of the Random123 suite for Philox-4x32-10 with
  // counter = 0 and key = 0.
  auto words = philox4x32({0, 0, 0, 0}, 0);
  EXPECT_EQ(words[0], 0x6627e8d5u);
  EXPECT_EQ(words[1], 0xe169c58du);
  EXPECT_EQ(words[2], 0xbc57ac4cu);
  EXPECT_EQ(words[3], 0x9b00dbd8u);
}

TEST(Random, DistributionsHaveTheRightMoments) {
  manual_seed(1);
  const int n = 200000;
  auto normal = randn({n}, DType::Float64).to_vector<double>();
  double mean = 0, sq = 0;
  for (double v : normal)
    mean += v, sq += v * v;
  mean /= n;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(sq / n - mean * mean, 1.0, 0.02);
  auto uniform = rand({n}).to_vector<float>();
  double umean = 0;
  for (float v : uniform) {
    ASSERT_GE(v, 0.f);
    ASSERT_LT(v, 1.f);
    umean += v;
  }
  EXPECT_NEAR(umean / n, 0.5, 0.005);
  auto ints = randint(-3, 4, {n}).to_vector<int64_t>();
  std::vector<int> counts(7);
  for (int64_t v : ints) {
    ASSERT_GE(v, -3);
    ASSERT_LT(v, 4);
    counts[size_t(v + 3)]++;
  }
  for (int c : counts)
    EXPECT_NEAR(c, n / 7.0, n / 7.0 * 0.05);
}

TEST(Printing, MatchesPyTorchFormat) {
  EXPECT_EQ(tensor({{1.f, 2.f}}).to_string(), "tensor([[1., 2.]])");
  EXPECT_EQ(tensor({1.5f, -2.25f}).to_string(), "tensor([ 1.5000, -2.2500])");
  EXPECT_EQ(tensor({1, 2, 3}).to_string(), "tensor([1, 2, 3])");
  EXPECT_EQ(tensor({1, 2}, DType::Int32).to_string(), "tensor([1, 2], dtype=kiln.int32)");
  EXPECT_EQ(tensor({true, false}).to_string(), "tensor([ True, False])");
  EXPECT_EQ(tensor({1.0, 2.0}, DType::Float64).to_string(), "tensor([1., 2.], dtype=kiln.float64)");
  EXPECT_EQ(scalar_tensor(3.5).to_string(), "tensor(3.5000)");
  EXPECT_EQ(zeros({0}).to_string(), "tensor([])");
  EXPECT_EQ(zeros({0, 3}).to_string(), "tensor([], size=(0, 3))");
  EXPECT_EQ(tensor({1e-5f, 1.f}).to_string(), "tensor([1.0000e-05, 1.0000e+00])");
  EXPECT_EQ(tensor({{1, 2}, {3, 4}}).to_string(), "tensor([[1, 2],\n        [3, 4]])");
  EXPECT_EQ(zeros({2, 1, 2}).to_string(), "tensor([[[0., 0.]],\n\n        [[0., 0.]]])");
}

TEST(Printing, SummarizesLargeTensors) {
  std::string s = arange(2000).to_string();
  EXPECT_EQ(s, "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
}

TEST(Tensor, ItemAndErrors) {
  EXPECT_EQ(scalar_tensor(2.5).item<double>(), 2.5);
  EXPECT_THROW(zeros({2}).item(), Error);
  EXPECT_THROW(zeros({2}).data<double>(), Error);
  EXPECT_THROW(zeros({2}).size(3), Error);
  EXPECT_EQ(zeros({2, 3}).size(-1), 3);
}

TEST(Copy, CastCloneFillAndVersionCounter) {
  Tensor a = tensor({1.7f, -2.5f});
  EXPECT_EQ(to(a, DType::Int64).to_vector<int64_t>(), (std::vector<int64_t>{1, -2}));
  EXPECT_EQ(to(a, DType::Bool).to_vector<bool>(), (std::vector<bool>{true, true}));
  Tensor b = clone(a);
  EXPECT_FALSE(b.is_alias_of(a));
  uint64_t v = a.version();
  fill_(a, 3);
  EXPECT_EQ(a.version(), v + 1);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{3, 3}));
  copy_(a, tensor({7}));
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{7, 7}));
  Tensor ints = zeros({2}, DType::Int64);
  EXPECT_THROW(copy_(a, zeros({3})), Error);
  EXPECT_EQ(fill_(ints, 1.5).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 1}));  // truncates, as PyTorch
}

TEST(FromBlob, SharesExternalMemoryAndReleasesIt) {
  float data[4] = {1, 2, 3, 4};
  bool released = false;
  {
    Tensor t = from_blob(data, {2, 2}, DType::Float32, [&] { released = true; });
    data[0] = 9;
    EXPECT_EQ(read_element(t, 0).to<float>(), 9);
  }
  EXPECT_TRUE(released);
}

}  // namespace
}  // namespace kiln
