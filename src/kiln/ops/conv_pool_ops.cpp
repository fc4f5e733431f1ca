#include "kiln/ops/registry.h"

namespace kiln {

void register_conv_pool_ops(OpRegistry& registry) {}

}  // namespace kiln
