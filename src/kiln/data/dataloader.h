// DataLoader: batches over a Dataset, in order or shuffled, for range-for:
//
//   kiln::DataLoader loader(dataset, {.batch_size = 64, .shuffle = true, .seed = 0});
//   for (int epoch = 0; epoch < 10; ++epoch)
//     for (kiln::Example batch : loader) train(batch.data, batch.target);
//
// Each begin() starts an epoch: with shuffle, a fresh permutation drawn from
// the loader's generator, so a seed fixes the order of every epoch.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "kiln/core/random.h"
#include "kiln/data/dataset.h"

namespace kiln {

struct DataLoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = false;
  bool drop_last = false;  // drop a last batch smaller than batch_size
  // Seeds the loader's own generator; without it shuffling draws from
  // kiln::default_generator() (which kiln::manual_seed fixes).
  std::optional<uint64_t> seed;
  // Replaces the dataset's collation (Dataset::get_batch) when set.
  std::function<Example(const std::vector<Example>&)> collate;
};

class DataLoader {
 public:
  class Iterator;

  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options = {});

  Iterator begin();  // starts a new epoch
  Iterator end();

  int64_t num_batches() const;  // per epoch
  int64_t batch_size() const { return options_.batch_size; }
  const Dataset& dataset() const { return *dataset_; }
  // The example order of the current epoch (after begin()).
  const std::vector<int64_t>& order() const { return order_; }

  // Batch `batch_index` of the current epoch.
  Example batch(int64_t batch_index) const;

  class Iterator {
   public:
    using value_type = Example;
    using difference_type = std::ptrdiff_t;

    Iterator(const DataLoader* loader, int64_t batch_index)
        : loader_(loader), batch_index_(batch_index) {}
    Example operator*() const { return loader_->batch(batch_index_); }
    Iterator& operator++() {
      ++batch_index_;
      return *this;
    }
    bool operator==(const Iterator& other) const { return batch_index_ == other.batch_index_; }
    bool operator!=(const Iterator& other) const { return !(*this == other); }

   private:
    const DataLoader* loader_;
    int64_t batch_index_;
  };

 private:
  void start_epoch();

  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  std::unique_ptr<Generator> generator_;  // null: the default generator
  std::vector<int64_t> order_;
};

}  // namespace kiln
