#include "kiln/ops/attrs_text.h"

namespace kiln {

std::string attrs_to_string(const Attrs& attrs) {
  std::string text;
  for (const auto& [name, value] : attrs.items())
    text += (text.empty() ? "" : ", ") + name + "=" + attr_to_string(value);
  return text;
}

}  // namespace kiln
