#include "kiln/ops/registry.h"

namespace kiln {

void register_view_ops(OpRegistry& registry) {}

}  // namespace kiln
