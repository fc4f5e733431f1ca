// The importer's table (import_table.cpp): ONNX op type -> translation,
// the hand-written ones (import_*.cpp) and the generic one for the ops whose
// OpDef declares a one-to-one form (import_generic.cpp).
#pragma once

#include "kiln/onnx/import_util.h"

namespace kiln::onnx {

// Adds an entry per ONNX op type that an OpDef declares one-to-one;
// refuses one the table already has (one_source.h).
void add_generic_importers(Table& table);

// Before any node is translated: one error listing every op of `graph`
// and its sub-graphs (If, Loop, Scan bodies) that kiln has no translation
// for (or whose domain it does not read), with node names and counts.
void check_every_op_translates(const pb::GraphProto& graph);

}  // namespace kiln::onnx
