// Datasets, the DataLoader and the progress bar.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <sstream>

#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

// 10 examples: data row i is {i, 10 + i}, target i is i.
std::shared_ptr<TensorDataset> counting_dataset(int64_t n = 10) {
  Tensor ids = arange(int64_t(0), n);
  Tensor data = stack({to(ids, DType::Float32), to(ids + 10, DType::Float32)}, 1);
  return std::make_shared<TensorDataset>(data, ids);
}

// The same examples through Dataset's default get_batch (one get + stack).
class CountingDataset : public Dataset {
 public:
  Example get(int64_t i) const override {
    return {tensor({float(i), float(10 + i)}), scalar_tensor(i)};
  }
  int64_t size() const override { return 10; }
};

std::vector<int64_t> targets_of(DataLoader& loader) {
  std::vector<int64_t> seen;
  for (Example batch : loader) {
    for (int64_t t : batch.target.to_vector<int64_t>())
      seen.push_back(t);
  }
  return seen;
}

TEST(TensorDataset, ServesRowsAsViews) {
  auto dataset = counting_dataset();
  EXPECT_EQ(dataset->size(), 10);
  Example example = dataset->get(3);
  EXPECT_EQ(example.data.shape(), (IntList{2}));
  EXPECT_EQ(example.data.to_vector<float>(), (std::vector<float>{3, 13}));
  EXPECT_EQ(example.target.item<int64_t>(), 3);
  EXPECT_TRUE(example.data.is_alias_of(dataset->data()));
}

TEST(TensorDataset, RejectsMismatchedTensorsAndBadIndices) {
  Error mismatch = error_of([] { TensorDataset(zeros({4, 2}), zeros({5})); });
  EXPECT_TRUE(mentions(mismatch, "share dim 0")) << mismatch.what();
  EXPECT_TRUE(mentions(mismatch, "[4, 2] and [5]")) << mismatch.what();
  auto dataset = counting_dataset();
  Error out_of_range = error_of([&] { dataset->get(10); });
  EXPECT_EQ(out_of_range.kind(), ErrorKind::Index);
  EXPECT_TRUE(mentions(out_of_range, "index 10")) << out_of_range.what();
}

TEST(DataLoader, BatchesInOrderWithAPartialLastBatch) {
  DataLoader loader(counting_dataset(), {.batch_size = 4});
  EXPECT_EQ(loader.num_batches(), 3);
  std::vector<IntList> shapes;
  for (Example batch : loader)
    shapes.push_back(batch.data.shape());
  EXPECT_EQ(shapes, (std::vector<IntList>{{4, 2}, {4, 2}, {2, 2}}));
  std::vector<int64_t> expected(10);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(targets_of(loader), expected);
  Example last = loader.batch(2);
  EXPECT_EQ(last.data.to_vector<float>(), (std::vector<float>{8, 18, 9, 19}));
}

TEST(DataLoader, DropLastDropsOnlyAShortBatch) {
  DataLoader dropping(counting_dataset(), {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(dropping.num_batches(), 2);
  EXPECT_EQ(targets_of(dropping).size(), 8u);
  DataLoader even(counting_dataset(), {.batch_size = 5, .drop_last = true});
  EXPECT_EQ(even.num_batches(), 2);
  DataLoader too_big(counting_dataset(), {.batch_size = 11, .drop_last = true});
  EXPECT_EQ(too_big.num_batches(), 0);
  EXPECT_TRUE(targets_of(too_big).empty());
}

TEST(DataLoader, ShuffleVisitsEveryIndexOnceAndASeedFixesTheOrder) {
  DataLoader a(counting_dataset(100), {.batch_size = 7, .shuffle = true, .seed = 42});
  DataLoader b(counting_dataset(100), {.batch_size = 7, .shuffle = true, .seed = 42});
  DataLoader c(counting_dataset(100), {.batch_size = 7, .shuffle = true, .seed = 43});
  std::vector<int64_t> a1 = targets_of(a), a2 = targets_of(a);
  std::vector<int64_t> b1 = targets_of(b), b2 = targets_of(b);
  EXPECT_EQ(a1, b1);  // same seed, same epochs
  EXPECT_EQ(a2, b2);
  EXPECT_NE(a1, a2);  // a new permutation each epoch
  EXPECT_NE(a1, targets_of(c));
  for (const auto& epoch : {a1, a2}) {
    std::vector<int64_t> sorted = epoch;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> all(100);
    std::iota(all.begin(), all.end(), 0);
    EXPECT_EQ(sorted, all);
  }
  // Data and target stay paired through the shuffle.
  for (Example batch : a) {
    std::vector<float> data = batch.data.to_vector<float>();
    std::vector<int64_t> target = batch.target.to_vector<int64_t>();
    for (size_t i = 0; i < target.size(); ++i)
      EXPECT_EQ(data[2 * i], float(target[i]));
  }
}

TEST(DataLoader, UnseededShuffleFollowsManualSeed) {
  manual_seed(7);
  DataLoader a(counting_dataset(50), {.batch_size = 8, .shuffle = true});
  std::vector<int64_t> first = targets_of(a);
  manual_seed(7);
  DataLoader b(counting_dataset(50), {.batch_size = 8, .shuffle = true});
  EXPECT_EQ(targets_of(b), first);
}

TEST(DataLoader, DefaultCollationStacksExamples) {
  DataLoader stacked(std::make_shared<CountingDataset>(), {.batch_size = 4});
  DataLoader gathered(counting_dataset(), {.batch_size = 4});
  auto s = stacked.begin();
  auto g = gathered.begin();
  for (; s != stacked.end(); ++s, ++g) {
    Example x = *s, y = *g;
    EXPECT_EQ(x.data.shape(), y.data.shape());
    EXPECT_EQ(x.data.to_vector<float>(), y.data.to_vector<float>());
    EXPECT_EQ(x.target.to_vector<int64_t>(), y.target.to_vector<int64_t>());
  }
}

TEST(DataLoader, CustomCollateReplacesTheDefault) {
  DataLoaderOptions options{.batch_size = 3};
  options.collate = [](const std::vector<Example>& examples) {
    Example batch = collate_stack(examples);
    return Example{sum(batch.data, {1}), batch.target};
  };
  DataLoader loader(counting_dataset(), options);
  Example first = *loader.begin();
  EXPECT_EQ(first.data.to_vector<float>(), (std::vector<float>{10, 12, 14}));
}

TEST(DataLoader, RejectsABadBatchSize) {
  Error e = error_of([] { DataLoader(counting_dataset(), {.batch_size = 0}); });
  EXPECT_TRUE(mentions(e, "batch_size must be at least 1, got 0")) << e.what();
}

TEST(Progress, FormatsCountRateAndPostfix) {
  std::string line = ProgressBar::format("epoch 1", 50, 200, 10.0, "loss 0.123", 10, false);
  EXPECT_EQ(line, "epoch 1  25%|##        | 50/200 [00:10<00:30, 5.0 it/s] loss 0.123");
  EXPECT_EQ(ProgressBar::format("", 3, 0, 2.0, "", 10, false), "3 [00:02, 1.5 it/s]");
  EXPECT_EQ(ProgressBar::format("", 0, 10, 0.0, "", 4, false),
            "  0%|    | 0/10 [00:00<?, 0.0 it/s]");
  EXPECT_EQ(format_duration(3725), "1:02:05");
}

TEST(Progress, PlainLinesWhenNotATerminal) {
  std::ostringstream out;
  {
    ProgressBar bar(4, "train", {.out = &out, .is_terminal = false, .print_interval = 0});
    bar.update();
    bar.set_postfix("loss 1.5");
    bar.update(3);
  }  // the destructor closes it
  std::string text = out.str();
  EXPECT_EQ(text.find('\r'), std::string::npos);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3);  // two updates and the close
  EXPECT_NE(text.find("1/4"), std::string::npos);
  EXPECT_NE(text.find("4/4"), std::string::npos);
  EXPECT_NE(text.find("loss 1.5\n"), std::string::npos);
}

TEST(Progress, RedrawsOneLineOnATerminal) {
  std::ostringstream out;
  ProgressBar bar(3, "", {.out = &out, .is_terminal = true, .redraw_interval = 0});
  bar.set_postfix("a much longer postfix");
  bar.update();
  bar.set_postfix("short");
  bar.update();
  bar.close();
  bar.update();  // after close: nothing
  std::string text = out.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\r'), 4);  // start, two updates, close
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1);
  EXPECT_EQ(text.back(), '\n');
  EXPECT_NE(text.find("\u2588"), std::string::npos);
}

}  // namespace
}  // namespace kiln
