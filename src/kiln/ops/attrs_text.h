// Attributes as one line of text, for the profiler's events (kept out of
// attrs.h, which every op includes).
#pragma once

#include <string>

#include "kiln/ops/attrs.h"

namespace kiln {

// "dim=1, keepdim=false": every attribute, as attr_to_string writes each.
std::string attrs_to_string(const Attrs& attrs);

}  // namespace kiln
