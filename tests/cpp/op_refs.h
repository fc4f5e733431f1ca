// Reading the PyTorch reference file written by tests/oracle/gen_refs.py.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "kiln/ops/op.h"

namespace kiln {

const nlohmann::json& op_refs();              // loaded once from KILN_OP_REFS
double json_number(const nlohmann::json& v);  // numbers, or "nan"/"inf" strings
// Builds an input in the layout the row asks for (contiguous, transposed,
// strided, expanded), holding the row's values.
Tensor tensor_from_json(const nlohmann::json& spec);
Attrs attrs_from_json(const OpDef& def, const nlohmann::json& attrs);
std::string test_name_of(const std::string& case_id);  // gtest-safe name

}  // namespace kiln
