// The exporter's last step before the checker: a node computing on int8,
// uint8 or int16 operands (which ONNX's schema or ONNX Runtime's kernels
// often lack) computes in int32 and casts its results back
// (export_widen.cpp says why that is exact).
#pragma once

#include "kiln/onnx/export_context.h"

namespace kiln::onnx {

// Rewrites every graph of `model` (If, Loop and Scan bodies too), written at
// `opset`.
void widen_types_onnx_lacks(pb::ModelProto& model, int opset);

}  // namespace kiln::onnx
