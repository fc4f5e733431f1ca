#include "kiln/optim/scheduler.h"

#include <cmath>
#include <numbers>

namespace kiln {

LRScheduler::LRScheduler(Optimizer& optimizer)
    : optimizer_(optimizer), base_lrs_(current_lrs()), last_lr_(base_lrs_) {}

std::vector<double> LRScheduler::current_lrs() const {
  std::vector<double> lrs;
  for (size_t g = 0; g < optimizer_.num_param_groups(); ++g)
    lrs.push_back(optimizer_.lr(g));
  return lrs;
}

void LRScheduler::step() {
  KILN_CHECK(optimizer_.num_param_groups() == base_lrs_.size(), "lr scheduler: the optimizer had ",
             base_lrs_.size(), " parameter groups when the scheduler was made and has ",
             optimizer_.num_param_groups(), " now");
  ++last_epoch_;
  std::vector<double> lrs = compute_lr();
  for (size_t g = 0; g < lrs.size(); ++g)
    optimizer_.set_lr(lrs[g], g);
  last_lr_ = std::move(lrs);
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  KILN_CHECK_VALUE(step_size >= 1, "StepLR: step_size must be at least 1, got ", step_size);
}

std::vector<double> StepLR::compute_lr() const {
  std::vector<double> lrs = current_lrs();
  if (last_epoch() % step_size_ != 0) return lrs;
  for (double& lr : lrs)
    lr *= gamma_;
  return lrs;
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), t_max_(T_max), eta_min_(eta_min) {
  KILN_CHECK_VALUE(T_max >= 1, "CosineAnnealingLR: T_max must be at least 1, got ", T_max);
}

std::vector<double> CosineAnnealingLR::compute_lr() const {
  const double pi = std::numbers::pi;
  int64_t epoch = last_epoch();
  std::vector<double> lrs = current_lrs();
  const std::vector<double>& base = base_lrs();
  // Python's % is a floor modulo; epoch - 1 - T_max can be negative.
  int64_t period = 2 * t_max_, phase = ((epoch - 1 - t_max_) % period + period) % period;
  for (size_t g = 0; g < lrs.size(); ++g) {
    if (phase == 0) {  // at the bottom: climb from eta_min
      lrs[g] = lrs[g] + (base[g] - eta_min_) * (1 - std::cos(pi / double(t_max_))) / 2;
    } else {
      lrs[g] = (1 + std::cos(pi * double(epoch) / double(t_max_))) /
                   (1 + std::cos(pi * double(epoch - 1) / double(t_max_))) * (lrs[g] - eta_min_) +
               eta_min_;
    }
  }
  return lrs;
}

}  // namespace kiln
