// Translations of ONNX's loss ops (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss) and the
// reductions built on them into kiln ops.
#include "kiln/onnx/import_util.h"

namespace kiln::onnx {

void add_loss_importers(Table& table) {
  (void)table;
}

}  // namespace kiln::onnx
