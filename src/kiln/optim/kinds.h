// The algorithms optimizer_kind() knows, one function per algorithm, each
// defined beside its update (sgd.cpp, adam.cpp, ...). Internal to kiln/optim.
#pragma once

#include "kiln/optim/functional.h"

namespace kiln {

const OptimizerKind& sgd_kind();
const OptimizerKind& adam_kind();
const OptimizerKind& adamw_kind();
const OptimizerKind& rmsprop_kind();
const OptimizerKind& adagrad_kind();
const OptimizerKind& adadelta_kind();
const OptimizerKind& adamax_kind();
const OptimizerKind& nadam_kind();
const OptimizerKind& radam_kind();

}  // namespace kiln
