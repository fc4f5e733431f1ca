// What every loss function checks and does with its `reduction` argument,
// shared by loss.cpp, loss_pointwise.cpp, loss_more.cpp and the loss
// modules (so the message is one text).
#pragma once

#include <string>

#include "kiln/core/tensor.h"
#include "kiln/ops/reduction.h"
#include "kiln/util/error.h"

namespace kiln::nn::detail {

// "mean", "sum" or "none" ("batchmean" too for kl_div); `fn` names the
// loss (or module) in the error.
inline void check_reduction(const std::string& reduction, const char* fn, bool batchmean = false) {
  KILN_CHECK_VALUE(reduction == "mean" || reduction == "sum" || reduction == "none" ||
                       (batchmean && reduction == "batchmean"),
                   fn, ": ", reduction, " is not a valid value for reduction (use mean, sum",
                   batchmean ? ", batchmean" : "", " or none)");
}

// The per-element loss summed, averaged or kept.
inline Tensor reduce(const Tensor& loss, const std::string& reduction) {
  if (reduction == "sum") return sum(loss);
  if (reduction == "mean") return mean(loss);
  return loss;
}

}  // namespace kiln::nn::detail
