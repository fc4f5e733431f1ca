#include "kiln/ops/registry.h"

namespace kiln {

void register_elementwise_unary_ops(OpRegistry& registry) {}

}  // namespace kiln
