// Adam's relatives, as torch.optim's single-tensor implementations (all
// with maximize, and weight decay joining the gradient unless decoupled):
//
//   Adamax: m = lerp(m, g, 1 - beta1);  u = max(beta2 * u, |g| + eps)
//           p -= lr / (1 - beta1^t) * m / u
//   NAdam:  mu_t = beta1 * (1 - 0.5 * 0.96^(t * momentum_decay));  prod *= mu_t
//           m, v as Adam;  d = sqrt(v / (1 - beta2^t)) + eps
//           p -= lr * (1 - mu_t) / (1 - prod) * g / d
//              + lr * mu_{t+1} / (1 - prod * mu_{t+1}) * m / d
//   RAdam:  m, v as Adam;  rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t)
//           p -= lr * m / (1 - beta1^t) * (rho_t > 5 ? rect_t * sqrt(1 - beta2^t) / (sqrt(v) + eps)
//           : 1)
#pragma once

#include "kiln/optim/optimizer.h"

namespace kiln {

struct AdamaxOptions {
  double lr = 2e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool maximize = false;

  Hyperparams to_hyperparams() const;
};

class Adamax : public Optimizer {
 public:
  Adamax(std::vector<Tensor> params, AdamaxOptions options = {});
  Adamax(std::vector<ParamGroup> groups, AdamaxOptions defaults = {});
};

struct NAdamOptions {
  double lr = 2e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  double momentum_decay = 4e-3;
  bool decoupled_weight_decay = false;
  bool maximize = false;

  Hyperparams to_hyperparams() const;
};

class NAdam : public Optimizer {
 public:
  NAdam(std::vector<Tensor> params, NAdamOptions options = {});
  NAdam(std::vector<ParamGroup> groups, NAdamOptions defaults = {});
};

struct RAdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool decoupled_weight_decay = false;
  bool maximize = false;

  Hyperparams to_hyperparams() const;
};

class RAdam : public Optimizer {
 public:
  RAdam(std::vector<Tensor> params, RAdamOptions options = {});
  RAdam(std::vector<ParamGroup> groups, RAdamOptions defaults = {});
};

}  // namespace kiln
