#include "kiln/ops/registry.h"

namespace kiln {

void register_linalg_ops(OpRegistry& registry) {}

}  // namespace kiln
