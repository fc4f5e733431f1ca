#include "kiln/util/int_list.h"

namespace kiln {

std::string to_string(const IntList& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(values[i]);
  }
  return out + "]";
}

}  // namespace kiln
