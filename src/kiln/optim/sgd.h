// Stochastic gradient descent with momentum, as torch.optim.SGD:
//
//   d = grad + weight_decay * p
//   buf = d on the first step, then momentum * buf + (1 - dampening) * d
//   d = nesterov ? d + momentum * buf : buf        (when momentum != 0)
//   p -= lr * d
#pragma once

#include "kiln/optim/optimizer.h"

namespace kiln {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;

  Hyperparams to_hyperparams() const;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options = {});
  // Groups override options by name: {{params, {{"lr", 0.01}}}, ...}.
  SGD(std::vector<ParamGroup> groups, SGDOptions defaults = {});

 protected:
  void prepare_capture(const Tensor& param, ParamState& state, const Hyperparams& options) override;
  void update(const Tensor& param, const Tensor& grad, ParamState& state,
              const Hyperparams& options) override;
  void check_options(const Hyperparams& options) const override;
};

}  // namespace kiln
