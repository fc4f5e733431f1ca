// Translations of ONNX's gather, scatter and selection ops (GatherND, ScatterND,
// ScatterElements, OneHot, Compress, NonZero, ...) into kiln ops.
#include "kiln/onnx/import_util.h"

namespace kiln::onnx {

void add_indexing_importers(Table& table) {
  (void)table;
}

}  // namespace kiln::onnx
