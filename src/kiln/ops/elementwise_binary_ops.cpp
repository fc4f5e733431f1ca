#include "kiln/ops/registry.h"

namespace kiln {

void register_elementwise_binary_ops(OpRegistry& registry) {}

}  // namespace kiln
