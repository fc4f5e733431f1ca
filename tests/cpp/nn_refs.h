// Reading the PyTorch reference file written by tests/oracle/gen_nn_refs.py.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "kiln/core/tensor.h"

namespace kiln {

const nlohmann::json& nn_refs();  // loaded once from KILN_NN_REFS
// Indices of the rows of one section ("modules", "losses"), for ValuesIn.
std::vector<size_t> nn_ref_rows(const char* section);
// Shape, then every element within atol + rtol * |expected| (NaN == NaN).
void expect_matches(const Tensor& actual, const nlohmann::json& expected, double rtol, double atol,
                    const std::string& what);

}  // namespace kiln
