// Loss modules over the functional losses. They take two inputs, so they are
// called as loss(input, target); the class weight (when given) is a buffer,
// as in PyTorch, so it shows in state_dict as "weight".
#pragma once

#include "kiln/nn/functional.h"
#include "kiln/nn/module.h"

namespace kiln::nn {

class CrossEntropyLoss : public Module {
 public:
  explicit CrossEntropyLoss(functional::CrossEntropyLossOptions options = {});
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target);
  Tensor operator()(const Tensor& input, const Tensor& target) { return forward(input, target); }

  functional::CrossEntropyLossOptions options;
};

class NLLLoss : public Module {
 public:
  explicit NLLLoss(functional::NLLLossOptions options = {});
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target);
  Tensor operator()(const Tensor& input, const Tensor& target) { return forward(input, target); }

  functional::NLLLossOptions options;
};

class MSELoss : public Module {
 public:
  explicit MSELoss(std::string reduction = "mean");
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target);
  Tensor operator()(const Tensor& input, const Tensor& target) { return forward(input, target); }

  std::string reduction;
};

class L1Loss : public Module {
 public:
  explicit L1Loss(std::string reduction = "mean");
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target);
  Tensor operator()(const Tensor& input, const Tensor& target) { return forward(input, target); }

  std::string reduction;
};

// weight and pos_weight are buffers, as in PyTorch.
class BCEWithLogitsLoss : public Module {
 public:
  explicit BCEWithLogitsLoss(functional::BCEWithLogitsLossOptions options = {});
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target);
  Tensor operator()(const Tensor& input, const Tensor& target) { return forward(input, target); }

  functional::BCEWithLogitsLossOptions options;
};

}  // namespace kiln::nn
