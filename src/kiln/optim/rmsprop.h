// RMSprop, Adagrad and Adadelta, as torch.optim's single-tensor
// implementations (g = maximize ? -grad : grad, + weight_decay * p):
//
//   RMSprop:  v = alpha * v + (1 - alpha) * g * g
//             centered: m = lerp(m, g, 1 - alpha), v~ = v - m * m (else v~ = v)
//             d = g / (sqrt(v~) + eps);  momentum: buf = momentum * buf + d, d = buf
//             p -= lr * d
//   Adagrad:  sum += g * g;  p -= lr / (1 + (t - 1) * lr_decay) * g / (sqrt(sum) + eps)
//   Adadelta: v = rho * v + (1 - rho) * g * g
//             d = sqrt(u + eps) / sqrt(v + eps) * g;  u = rho * u + (1 - rho) * d * d
//             p -= lr * d
#pragma once

#include "kiln/optim/optimizer.h"

namespace kiln {

struct RMSpropOptions {
  double lr = 1e-2;
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0;
  double momentum = 0;
  bool centered = false;
  bool maximize = false;

  Hyperparams to_hyperparams() const;
};

class RMSprop : public Optimizer {
 public:
  RMSprop(std::vector<Tensor> params, RMSpropOptions options = {});
  RMSprop(std::vector<ParamGroup> groups, RMSpropOptions defaults = {});
};

struct AdagradOptions {
  double lr = 1e-2;
  double lr_decay = 0;
  double weight_decay = 0;
  double initial_accumulator_value = 0;
  double eps = 1e-10;
  bool maximize = false;

  Hyperparams to_hyperparams() const;
};

// Makes every parameter's state at construction, as torch does.
class Adagrad : public Optimizer {
 public:
  Adagrad(std::vector<Tensor> params, AdagradOptions options = {});
  Adagrad(std::vector<ParamGroup> groups, AdagradOptions defaults = {});
};

struct AdadeltaOptions {
  double lr = 1.0;
  double rho = 0.9;
  double eps = 1e-6;
  double weight_decay = 0;
  bool maximize = false;

  Hyperparams to_hyperparams() const;
};

class Adadelta : public Optimizer {
 public:
  Adadelta(std::vector<Tensor> params, AdadeltaOptions options = {});
  Adadelta(std::vector<ParamGroup> groups, AdadeltaOptions defaults = {});
};

}  // namespace kiln
