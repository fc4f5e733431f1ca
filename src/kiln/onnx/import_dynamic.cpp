// NonZero, Compress, Unique and NonMaxSuppression: ops whose output sizes
// depend on the input's values.
#include "kiln/onnx/import_util.h"

namespace kiln::onnx {

void add_dynamic_importers(Table& table) {
  (void)table;
}

}  // namespace kiln::onnx
