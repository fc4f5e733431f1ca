// Adam and AdamW, as torch.optim's single-tensor implementation:
//
//   t += 1;  g = maximize ? -grad : grad
//   Adam:  g += weight_decay * p           AdamW (decoupled):  p *= 1 - lr * weight_decay
//   m = lerp(m, g, 1 - beta1)              v = beta2 * v + (1 - beta2) * g * g
//   v_max = max(v_max, v)                  (amsgrad; then v_max replaces v below)
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
#pragma once

#include "kiln/optim/optimizer.h"

namespace kiln {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;  // AdamW's default is 1e-2
  bool amsgrad = false;
  bool maximize = false;

  Hyperparams to_hyperparams() const;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options = {});
  Adam(std::vector<ParamGroup> groups, AdamOptions defaults = {});

 protected:
  Adam(const OptimizerKind& kind, std::vector<ParamGroup> groups, AdamOptions defaults);
};

// Adam whose weight decay shrinks the parameter instead of joining the
// gradient (decoupled_weight_decay = 1).
class AdamW : public Adam {
 public:
  static AdamOptions default_options() {
    AdamOptions options;
    options.weight_decay = 1e-2;
    return options;
  }
  AdamW(std::vector<Tensor> params, AdamOptions options = default_options());
  AdamW(std::vector<ParamGroup> groups, AdamOptions defaults = default_options());
};

}  // namespace kiln
