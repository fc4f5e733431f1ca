// Shape and stride lists. A plain vector keeps the code simple; kept behind a
// name so a small-buffer vector can replace it if profiles ask for one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

using IntList = std::vector<int64_t>;

// "[2, 3]"
std::string to_string(const IntList& values);

}  // namespace kiln
