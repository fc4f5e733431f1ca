// cat, stack and the indexing ops through their C++ API: fresh storage,
// dtype promotion, error kinds, wide inputs and large non-contiguous inputs.
// Values against PyTorch live in tests/oracle/cases_shape.py.
#include <gtest/gtest.h>

#include "kiln/core/factory.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/view.h"
#include "test_util.h"

namespace kiln {
namespace {

TEST(Cat, JoinsAndPromotes) {
  Tensor a = tensor({{1, 2}, {3, 4}}, DType::Int32);
  Tensor b = tensor({{0.5f, 1.5f}});
  Tensor c = cat({a, b});
  EXPECT_EQ(c.dtype(), DType::Float32);
  EXPECT_EQ(c.shape(), (IntList{3, 2}));
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 0.5f, 1.5f}));
  EXPECT_FALSE(c.is_alias_of(b));
  Tensor side = cat({a, t(a)}, -1);
  EXPECT_EQ(side.to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 1, 3, 3, 4, 2, 4}));
}

TEST(Cat, ManyInputsAndLargeStridedInputs) {
  std::vector<Tensor> parts;
  for (int64_t i = 0; i < 40; ++i)
    parts.push_back(full({1, 2}, i, DType::Int64));
  Tensor joined = cat(parts);
  EXPECT_EQ(joined.shape(), (IntList{40, 2}));
  EXPECT_EQ(joined.to_vector<int64_t>()[79], 39);
  EXPECT_EQ(stack(parts).shape(), (IntList{40, 1, 2}));

  Tensor big = reshape(arange(300 * 200), {300, 200});
  Tensor big_t = transpose(big, 0, 1);  // [200, 300], not contiguous
  Tensor both = cat({big_t, big_t}, 1);
  EXPECT_EQ(both.shape(), (IntList{200, 600}));
  EXPECT_EQ(read_element(both, 1 * 600 + 300 + 2).to_int(), 2 * 200 + 1);
}

TEST(Cat, Errors) {
  EXPECT_EQ(error_of([] { cat({}); }).kind(), ErrorKind::Value);
  Error e = error_of([] { cat({zeros({2, 3}), zeros({2, 4})}); });
  EXPECT_TRUE(mentions(e, "Sizes of tensors must match except in dimension 0")) << e.what();
  EXPECT_TRUE(mentions(e, "tensor number 1")) << e.what();
  EXPECT_EQ(error_of([] { cat({zeros({2}), zeros({2})}, 1); }).kind(), ErrorKind::Index);
  EXPECT_EQ(error_of([] { stack({}); }).kind(), ErrorKind::Value);
}

TEST(Stack, AddsADim) {
  Tensor a = tensor({1.f, 2.f});
  Tensor b = tensor({3.f, 4.f});
  EXPECT_EQ(stack({a, b}).to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(stack({a, b}, 1).to_vector<float>(), (std::vector<float>{1, 3, 2, 4}));
  EXPECT_EQ(stack({a, b}, -1).shape(), (IntList{2, 2}));
  EXPECT_EQ(stack({scalar_tensor(1.0), scalar_tensor(2.0)}).shape(), (IntList{2}));
  EXPECT_THROW(stack({a, tensor({1.f})}), Error);
}

TEST(IndexSelect, PicksAlongDim) {
  Tensor x = reshape(arange(12), {3, 4});
  Tensor rows = index_select(x, 0, tensor({2, 0}, DType::Int32));
  EXPECT_EQ(rows.to_vector<int64_t>(), (std::vector<int64_t>{8, 9, 10, 11, 0, 1, 2, 3}));
  Tensor cols = index_select(t(x), 1, tensor({1, 1}));
  EXPECT_EQ(cols.shape(), (IntList{4, 2}));
  EXPECT_EQ(cols.to_vector<int64_t>(), (std::vector<int64_t>{4, 4, 5, 5, 6, 6, 7, 7}));
  Error e = error_of([&] { index_select(x, 1, tensor({4})); });
  EXPECT_EQ(e.kind(), ErrorKind::Index);
  EXPECT_TRUE(mentions(e, "index 4")) << e.what();
  EXPECT_EQ(error_of([&] { index_select(x, 0, tensor({0.f})); }).kind(), ErrorKind::Type);
}

TEST(Gather, FollowsPyTorch) {
  Tensor x = tensor({{1.f, 2.f}, {3.f, 4.f}});
  Tensor got = gather(x, 1, tensor({{0, 0}, {1, 0}}));
  EXPECT_EQ(got.to_vector<float>(), (std::vector<float>{1, 1, 4, 3}));
  Error e = error_of([&] { gather(x, 0, tensor({{2, 0}})); });
  EXPECT_EQ(e.kind(), ErrorKind::Index);
  EXPECT_TRUE(mentions(e, "index 2 is out of bounds for dimension 0 with size 2")) << e.what();
}

TEST(Embedding, LooksUpRows) {
  Tensor weight = reshape(arange(0.0, 6.0), {3, 2});
  Tensor out = embedding(weight, tensor({{2, 0}}), 0);
  EXPECT_EQ(out.shape(), (IntList{1, 2, 2}));
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{4, 5, 0, 1}));
  EXPECT_EQ(embedding(weight, tensor({1}), -1).shape(), (IntList{1, 2}));
  EXPECT_EQ(error_of([&] { embedding(weight, tensor({3})); }).kind(), ErrorKind::Index);
  EXPECT_THROW(embedding(weight, tensor({1}), 3), Error);
}

TEST(OneHot, InfersClassCount) {
  Tensor x = tensor({0, 2, 1});
  Tensor h = one_hot(x);
  EXPECT_EQ(h.dtype(), DType::Int64);
  EXPECT_EQ(h.shape(), (IntList{3, 3}));
  EXPECT_EQ(h.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 0, 0, 1, 0, 1, 0}));
  EXPECT_EQ(one_hot(x, 5).shape(), (IntList{3, 5}));
  EXPECT_EQ(one_hot(slice(x, 0, 0, std::nullopt, 2)).shape(), (IntList{2, 2}));  // [0, 1]
  EXPECT_TRUE(mentions(error_of([] { one_hot(zeros({0}, DType::Int64)); }),
                       "Can not infer total number of classes from empty tensor"));
  EXPECT_TRUE(mentions(error_of([] { one_hot(tensor({-2})); }), "non-negative"));
  EXPECT_TRUE(mentions(error_of([] { one_hot(tensor({1.f})); }), "LongTensor"));
  EXPECT_THROW(one_hot(x, 2), Error);
  EXPECT_THROW(one_hot(x, 0), Error);
}

}  // namespace
}  // namespace kiln
