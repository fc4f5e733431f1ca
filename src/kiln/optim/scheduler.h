// Learning-rate schedulers, as torch.optim.lr_scheduler: construction records
// each group's lr as its base lr (epoch 0); step() advances one epoch and
// writes the new lr into the optimizer's groups. The updates are torch's
// recursive ("chainable") forms, so the values match torch's bit for bit and
// an lr changed by hand between steps carries on as it would there.
//
//   kiln::StepLR sched(opt, /*step_size=*/30, /*gamma=*/0.1);
//   for (epoch ...) { train(); sched.step(); }
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/optim/optimizer.h"

namespace kiln {

class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;

  void step();
  // The lr of each group after the latest step (or construction).
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }

 protected:
  // Each group's lr for last_epoch(), from the optimizer's current lrs.
  virtual std::vector<double> compute_lr() const = 0;
  Optimizer& optimizer() const { return optimizer_; }
  std::vector<double> current_lrs() const;

 private:
  Optimizer& optimizer_;
  std::vector<double> base_lrs_, last_lr_;
  int64_t last_epoch_ = 0;
};

// Multiplies each lr by gamma every step_size epochs.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  std::vector<double> compute_lr() const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// Anneals each lr from its base to eta_min along a half cosine over T_max
// epochs (and back up over the next T_max, as torch does when run past it).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0);

 protected:
  std::vector<double> compute_lr() const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

}  // namespace kiln
