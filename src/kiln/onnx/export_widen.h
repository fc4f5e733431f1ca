// The exporter's last step before the checker: where ONNX's schema of a node
// does not allow an operand's type (int8, uint8, int16 in Pow, ReduceSum,
// Neg, ...), the node computes in a wider type and casts its results back
// (export_widen.cpp says why that is exact).
#pragma once

#include "kiln/onnx/export_context.h"

namespace kiln::onnx {

// Rewrites the top-level graph of `model`, written at `opset`; sub-graphs
// (If, Loop, Scan bodies) are left as they are.
void widen_types_onnx_lacks(pb::ModelProto& model, int opset);

}  // namespace kiln::onnx
