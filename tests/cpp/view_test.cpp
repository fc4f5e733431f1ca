// Views alias their base: shared storage and version counter, writes seen
// both ways. Values against PyTorch live in tests/oracle/cases_view.py.
#include <gtest/gtest.h>

#include "kiln/core/factory.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/view.h"
#include "test_util.h"

namespace kiln {
namespace {

Tensor iota(const IntList& shape) {
  return reshape(arange(numel_of(shape)), shape);
}

TEST(View, EveryViewOpSharesStorage) {
  Tensor x = iota({2, 3, 4});
  std::vector<Tensor> views = {view(x, {6, 4}),          transpose(x, 0, 2),
                               permute(x, {1, 2, 0}),    expand(unsqueeze(x, 0), {5, 2, 3, 4}),
                               squeeze(unsqueeze(x, 1)), narrow(x, 1, 1, 2),
                               select(x, 2, 3),          slice(x, 2, 1, std::nullopt, 2),
                               reshape(x, {4, 6}),       flatten(x)};
  for (const Tensor& v : split(x, 2, 2))
    views.push_back(v);
  for (const Tensor& v : chunk(x, 2, 1))
    views.push_back(v);
  for (size_t i = 0; i < views.size(); ++i) {
    EXPECT_TRUE(views[i].is_alias_of(x)) << "view " << i;
    EXPECT_FALSE(views[i].is_same(x)) << "view " << i;
  }
}

TEST(View, WriteThroughViewIsSeenByBase) {
  Tensor x = zeros({3, 4});
  fill_(select(x, 0, 1), 5.0);
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{0, 0, 0, 0, 5, 5, 5, 5, 0, 0, 0, 0}));
  copy_(slice(x, 1, 0, std::nullopt, 2), tensor({1.f, 2.f}));
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 0, 2, 0, 1, 5, 2, 5, 1, 0, 2, 0}));
  fill_(narrow(transpose(x, 0, 1), 0, 3, 1), 9.0);
  EXPECT_EQ(select(x, 1, 3).to_vector<float>(), (std::vector<float>{9, 9, 9}));
}

TEST(View, WriteToBaseIsSeenByView) {
  Tensor x = zeros({2, 3});
  Tensor row = select(x, 0, 1);
  Tensor col = select(transpose(x, 0, 1), 0, 2);
  std::vector<Tensor> pieces = split(x, 1, 1);
  copy_(x, iota({2, 3}));
  EXPECT_EQ(row.to_vector<int64_t>(), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(col.to_vector<int64_t>(), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(pieces[1].to_vector<int64_t>(), (std::vector<int64_t>{1, 4}));
}

TEST(View, VersionCounterIsShared) {
  Tensor x = zeros({4});
  Tensor v = narrow(x, 0, 1, 2);
  uint64_t before = x.version();
  fill_(v, 1.0);
  EXPECT_GT(x.version(), before);
  EXPECT_EQ(x.version(), v.version());
  zero_(x);
  EXPECT_EQ(x.version(), v.version());
}

TEST(View, ExpandUsesStrideZero) {
  Tensor x = tensor({1.f, 2.f, 3.f});
  Tensor e = expand(x, {2, 3});
  EXPECT_EQ(e.shape(), (IntList{2, 3}));
  EXPECT_EQ(e.strides(), (IntList{0, 1}));
  Tensor col = expand(view(x, {3, 1}), {-1, 4});
  EXPECT_EQ(col.strides(), (IntList{1, 0}));
  EXPECT_EQ(expand_as(x, zeros({2, 2, 3})).shape(), (IntList{2, 2, 3}));
  fill_(x, 7.0);
  EXPECT_EQ(e.to_vector<float>(), std::vector<float>(6, 7.f));
}

TEST(View, ReshapeAliasesWhenItCanAndCopiesWhenItMust) {
  Tensor x = iota({3, 4});
  Tensor aliased = reshape(x, {2, 6});
  EXPECT_TRUE(aliased.is_alias_of(x));
  Tensor xt = transpose(x, 0, 1);
  Tensor copied = reshape(xt, {12});
  EXPECT_FALSE(copied.is_alias_of(x));
  EXPECT_TRUE(copied.is_contiguous());
  EXPECT_EQ(copied.to_vector<int64_t>(),
            (std::vector<int64_t>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  // Merging dims that are laid out together still views a transposed tensor.
  Tensor x3 = transpose(iota({2, 3, 4}), 0, 1);  // shape [3, 2, 4]
  EXPECT_FALSE(reshape(x3, {3, 8}).is_alias_of(x3));
  EXPECT_TRUE(reshape(x3, {3, 2, 2, 2}).is_alias_of(x3));
}

TEST(View, ViewOfTransposedNamesReshape) {
  Tensor xt = transpose(iota({3, 4}), 0, 1);
  Error e = error_of([&] { view(xt, {12}); });
  EXPECT_NE(std::string(e.what()).find("Use .reshape(...) instead"), std::string::npos);
  EXPECT_NE(std::string(e.what()).find("[4, 3]"), std::string::npos) << e.what();
}

TEST(View, FlattenSqueezeUnsqueezeRoundTrip) {
  Tensor x = iota({2, 3, 4});
  Tensor flat = flatten(x, 1);
  EXPECT_EQ(flat.shape(), (IntList{2, 12}));
  EXPECT_EQ(view(flat, {2, 3, 4}).to_vector<int64_t>(), x.to_vector<int64_t>());
  EXPECT_EQ(flatten(x, 0, 1).shape(), (IntList{6, 4}));
  EXPECT_EQ(flatten(x, -1, -1).shape(), x.shape());
  EXPECT_EQ(flatten(scalar_tensor(2.0)).shape(), (IntList{1}));
  // A transposed tensor can't be viewed flat: flatten copies instead.
  Tensor xt = transpose(x, 0, 2);
  EXPECT_FALSE(flatten(xt).is_alias_of(x));
  EXPECT_EQ(flatten(xt).to_vector<int64_t>(), reshape(contiguous(xt), {24}).to_vector<int64_t>());
  EXPECT_THROW(flatten(x, 2, 1), Error);

  Tensor u = unsqueeze(unsqueeze(x, 0), -1);
  EXPECT_EQ(u.shape(), (IntList{1, 2, 3, 4, 1}));
  EXPECT_TRUE(u.is_contiguous());
  EXPECT_EQ(squeeze(u).shape(), x.shape());
  EXPECT_EQ(squeeze(u, 0).shape(), (IntList{2, 3, 4, 1}));
  EXPECT_EQ(squeeze(u, 1).shape(), u.shape());  // size 2: left alone
  EXPECT_EQ(squeeze(u).to_vector<int64_t>(), x.to_vector<int64_t>());
  EXPECT_EQ(unsqueeze(scalar_tensor(1.0), 0).shape(), (IntList{1}));
  EXPECT_EQ(squeeze(zeros({1, 1})).shape(), (IntList{}));
}

TEST(View, TransposeHelpers) {
  Tensor x = iota({2, 3});
  EXPECT_EQ(t(x).shape(), (IntList{3, 2}));
  EXPECT_EQ(t(x).strides(), (IntList{1, 3}));
  EXPECT_EQ(t(arange(3)).shape(), (IntList{3}));
  EXPECT_EQ(t(scalar_tensor(1.0)).shape(), (IntList{}));
  Error e = error_of([] { t(zeros({2, 3, 4})); });
  EXPECT_NE(std::string(e.what()).find("t() expects a tensor with <= 2 dimensions, but self is 3D"),
            std::string::npos);
  EXPECT_EQ(permute(iota({2, 3, 4}), {2, 0, 1}).strides(), (IntList{1, 12, 4}));
}

TEST(View, SelectNarrowSliceOffsets) {
  Tensor x = iota({4, 5});
  EXPECT_EQ(select(x, 1, -1).to_vector<int64_t>(), (std::vector<int64_t>{4, 9, 14, 19}));
  EXPECT_EQ(narrow(x, 0, -2, 1).to_vector<int64_t>(), (std::vector<int64_t>{10, 11, 12, 13, 14}));
  Tensor s = slice(select(x, 0, 2), 0, -4, 100, 2);
  EXPECT_EQ(s.to_vector<int64_t>(), (std::vector<int64_t>{11, 13}));
  EXPECT_EQ(s.offset(), 11);
  EXPECT_EQ(s.strides(), (IntList{2}));
  EXPECT_EQ(slice(x, 0, 3, 1).shape(), (IntList{0, 5}));
  EXPECT_EQ(slice(x, 0).shape(), x.shape());
  EXPECT_EQ(error_of([&] { select(x, 0, 4); }).kind(), ErrorKind::Index);
  EXPECT_EQ(error_of([&] { select(x, 2, 0); }).kind(), ErrorKind::Index);
  EXPECT_EQ(error_of([&] { slice(x, 0, 0, 2, 0); }).kind(), ErrorKind::Value);
}

TEST(View, SplitAndChunkSizes) {
  Tensor x = iota({5, 2});
  auto sizes_of = [](const std::vector<Tensor>& parts, int64_t dim) {
    IntList sizes;
    for (const Tensor& p : parts)
      sizes.push_back(p.size(dim));
    return sizes;
  };
  EXPECT_EQ(sizes_of(split(x, 2), 0), (IntList{2, 2, 1}));
  EXPECT_EQ(sizes_of(split(x, IntList{1, 4}), 0), (IntList{1, 4}));
  EXPECT_EQ(sizes_of(split(x, IntList{0, 5, 0}), 0), (IntList{0, 5, 0}));
  EXPECT_EQ(sizes_of(split(x, 1, -1), 1), (IntList{1, 1}));
  EXPECT_EQ(sizes_of(chunk(x, 3), 0), (IntList{2, 2, 1}));
  EXPECT_EQ(sizes_of(chunk(arange(6), 4), 0), (IntList{2, 2, 2}));  // fewer than asked
  EXPECT_EQ(sizes_of(chunk(zeros({0, 2}), 3), 0), (IntList{0, 0, 0}));
  std::vector<Tensor> parts = split(x, IntList{1, 4});
  EXPECT_EQ(parts[1].offset(), 2);
  EXPECT_EQ(parts[1].to_vector<int64_t>(), (std::vector<int64_t>{2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(View, ErrorsNameTheOpAndShape) {
  Tensor x = zeros({2, 3});
  Error e = error_of([&] { expand(x, {2, 4}); });
  EXPECT_NE(std::string(e.what()).find("Target sizes: [2, 4].  Tensor sizes: [2, 3]"),
            std::string::npos);
  e = error_of([&] { transpose(x, 0, 5); });
  EXPECT_EQ(e.kind(), ErrorKind::Index);
  EXPECT_NE(std::string(e.what()).find("transpose: dim 5"), std::string::npos);
  e = error_of([&] { unsqueeze(x, -4); });
  EXPECT_EQ(e.kind(), ErrorKind::Index);
  EXPECT_THROW(permute(x, {1}), Error);
  EXPECT_THROW(reshape(x, {4, 2}), Error);
}

}  // namespace
}  // namespace kiln
