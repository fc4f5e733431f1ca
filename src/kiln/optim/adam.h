// Adam and AdamW, as torch.optim's single-tensor implementation:
//
//   t += 1
//   Adam:  g = grad + weight_decay * p      AdamW:  p *= 1 - lr * weight_decay
//   m = lerp(m, g, 1 - beta1)               v = beta2 * v + (1 - beta2) * g * g
//   v_max = max(v_max, v)                   (amsgrad; then v_max replaces v below)
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

  Hyperparams to_hyperparams() const;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options = {});
  Adam(std::vector<ParamGroup> groups, AdamOptions defaults = {});

 protected:
  // AdamW: weight decay shrinks the parameter instead of joining the gradient.
  Adam(std::string name, bool decoupled_weight_decay, std::vector<ParamGroup> groups,
       AdamOptions defaults);
  void prepare_capture(const Tensor& param, ParamState& state, const Hyperparams& options) override;
  void update(const Tensor& param, const Tensor& grad, ParamState& state,
              const Hyperparams& options) override;
  void check_options(const Hyperparams& options) const override;

 private:
  bool decoupled_weight_decay_;
};

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
