// Translations of ONNX's activations and pointwise ops that are not one kiln op of
// the same name (Hardmax, Shrink, Celu, ...) into kiln ops.
#include "kiln/onnx/import_util.h"

namespace kiln::onnx {

void add_activation_importers(Table& table) {
  (void)table;
}

}  // namespace kiln::onnx
