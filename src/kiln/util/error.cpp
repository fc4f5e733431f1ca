#include "kiln/util/error.h"

namespace kiln {

void throw_error(ErrorKind kind, const std::string& message) {
  throw Error(kind, message);
}

}  // namespace kiln
