#include "kiln/ops/registry.h"

namespace kiln {

void register_nn_ops(OpRegistry& registry) {}

}  // namespace kiln
