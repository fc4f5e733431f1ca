// Datasets: what a DataLoader draws examples from. A dataset is indexable
// (get(i), size()); TensorDataset serves rows of in-memory tensors.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln {

// One example, or a batch of them (the same fields stacked along a new dim 0).
// `target` is undefined for datasets without one.
struct Example {
  Tensor data;
  Tensor target;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual Example get(int64_t index) const = 0;
  virtual int64_t size() const = 0;

  // The examples at `indices`, collated. The default stacks get(i) with
  // kiln::stack; a dataset that holds its examples in tensors overrides it
  // to gather a batch in one op instead of one per example.
  virtual Example get_batch(const std::vector<int64_t>& indices) const;
};

// Stacks examples along a new dim 0: data with data, target with target.
Example collate_stack(const std::vector<Example>& examples);

// Rows of tensors that share dim 0: example i is {data[i], target[i]}. The
// rows are views (no copy); batches are gathered with index_select.
class TensorDataset : public Dataset {
 public:
  explicit TensorDataset(Tensor data, Tensor target = {});

  Example get(int64_t index) const override;
  int64_t size() const override { return data_.size(0); }
  Example get_batch(const std::vector<int64_t>& indices) const override;

  const Tensor& data() const { return data_; }
  const Tensor& target() const { return target_; }

 private:
  Tensor data_, target_;
};

}  // namespace kiln
