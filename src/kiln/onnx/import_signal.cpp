// DFT, STFT, MelWeightMatrix and Det.
#include "kiln/onnx/import_util.h"

namespace kiln::onnx {

void add_signal_importers(Table& table) {
  (void)table;
}

}  // namespace kiln::onnx
