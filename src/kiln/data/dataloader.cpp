#include "kiln/data/dataloader.h"

#include <algorithm>
#include <numeric>

#include "kiln/core/factory.h"
#include "kiln/ops/random.h"

namespace kiln {

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  KILN_CHECK_VALUE(dataset_ != nullptr, "DataLoader: no dataset");
  KILN_CHECK_VALUE(options_.batch_size >= 1, "DataLoader: batch_size must be at least 1, got ",
                   options_.batch_size);
  if (options_.seed) generator_ = std::make_unique<Generator>(*options_.seed);
}

int64_t DataLoader::num_batches() const {
  int64_t n = dataset_->size(), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

void DataLoader::start_epoch() {
  int64_t n = dataset_->size();
  if (!options_.shuffle) {
    order_.resize(size_t(n));
    std::iota(order_.begin(), order_.end(), int64_t(0));
    return;
  }
  Tensor permutation =
      randperm(n, DType::Int64, generator_ ? generator_.get() : &default_generator());
  order_ = permutation.to_vector<int64_t>();
}

DataLoader::Iterator DataLoader::begin() {
  start_epoch();
  return Iterator(this, 0);
}

DataLoader::Iterator DataLoader::end() {
  return Iterator(this, num_batches());
}

Example DataLoader::batch(int64_t batch_index) const {
  KILN_CHECK_INDEX(batch_index >= 0 && batch_index < num_batches(), "DataLoader: batch ",
                   batch_index, " is out of range for ", num_batches(), " batches");
  KILN_CHECK(int64_t(order_.size()) == dataset_->size(),
             "DataLoader: the dataset changed size since the epoch began (call begin() again)");
  size_t first = size_t(batch_index * options_.batch_size);
  size_t last = std::min(order_.size(), first + size_t(options_.batch_size));
  std::vector<int64_t> indices(order_.begin() + first, order_.begin() + last);
  if (!options_.collate) return dataset_->get_batch(indices);
  std::vector<Example> examples;
  examples.reserve(indices.size());
  for (int64_t index : indices)
    examples.push_back(dataset_->get(index));
  return options_.collate(examples);
}

}  // namespace kiln
