#include "kiln/ops/registry.h"

namespace kiln {

void register_shape_ops(OpRegistry& registry) {}

}  // namespace kiln
