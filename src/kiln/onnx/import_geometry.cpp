// Placeholder: the importers of this file are being written.
#include "kiln/onnx/import_context.h"

namespace kiln::onnx {

void add_geometry_importers(std::unordered_map<std::string, ImportFn>&) {}

}  // namespace kiln::onnx
