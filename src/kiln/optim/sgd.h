// Stochastic gradient descent with momentum, as torch.optim.SGD:
//
//   d = (maximize ? -grad : grad) + weight_decay * p
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
  bool maximize = false;

  Hyperparams to_hyperparams() const;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options = {});
  // Groups override options by name: {{params, {{"lr", 0.01}}}, ...}.
  SGD(std::vector<ParamGroup> groups, SGDOptions defaults = {});
};

}  // namespace kiln
