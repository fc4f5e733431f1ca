#include "kiln/data/dataset.h"

#include "kiln/core/factory.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/view.h"

namespace kiln {

Example Dataset::get_batch(const std::vector<int64_t>& indices) const {
  std::vector<Example> examples;
  examples.reserve(indices.size());
  for (int64_t index : indices)
    examples.push_back(get(index));
  return collate_stack(examples);
}

Example collate_stack(const std::vector<Example>& examples) {
  KILN_CHECK_VALUE(!examples.empty(), "collate_stack: no examples to collate");
  std::vector<Tensor> data, targets;
  data.reserve(examples.size());
  targets.reserve(examples.size());
  bool has_target = examples.front().target.defined();
  for (size_t i = 0; i < examples.size(); ++i) {
    const Example& example = examples[i];
    KILN_CHECK_VALUE(example.data.defined(), "collate_stack: example ", i, " has no data");
    KILN_CHECK_VALUE(example.target.defined() == has_target, "collate_stack: example ", i,
                     (has_target ? " lacks" : " has"), " a target while example 0 ",
                     (has_target ? "has one" : "does not"));
    data.push_back(example.data);
    if (has_target) targets.push_back(example.target);
  }
  Example batch{stack(data, 0), {}};
  if (has_target) batch.target = stack(targets, 0);
  return batch;
}

TensorDataset::TensorDataset(Tensor data, Tensor target)
    : data_(std::move(data)), target_(std::move(target)) {
  KILN_CHECK_VALUE(data_.defined() && data_.dim() >= 1,
                   "TensorDataset: data needs at least one dim (the example index)");
  if (!target_.defined()) return;
  KILN_CHECK_VALUE(target_.dim() >= 1 && target_.size(0) == data_.size(0),
                   "TensorDataset: data and target must share dim 0, got shapes ", data_.shape(),
                   " and ", target_.shape());
}

Example TensorDataset::get(int64_t index) const {
  KILN_CHECK_INDEX(index >= 0 && index < size(), "TensorDataset: index ", index,
                   " is out of range for a dataset of size ", size());
  Example example{select(data_, 0, index), {}};
  if (target_.defined()) example.target = select(target_, 0, index);
  return example;
}

Example TensorDataset::get_batch(const std::vector<int64_t>& indices) const {
  KILN_CHECK_VALUE(!indices.empty(), "TensorDataset: empty batch");
  for (int64_t index : indices) {
    KILN_CHECK_INDEX(index >= 0 && index < size(), "TensorDataset: index ", index,
                     " is out of range for a dataset of size ", size());
  }
  Tensor rows = tensor(indices, {int64_t(indices.size())});
  Example batch{index_select(data_, 0, rows), {}};
  if (target_.defined()) batch.target = index_select(target_, 0, rows);
  return batch;
}

}  // namespace kiln
