#include "nn_refs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "op_refs.h"

namespace kiln {

using nlohmann::json;

const json& nn_refs() {
  static const json refs = [] {
    const char* path = std::getenv("KILN_NN_REFS");
    std::ifstream in(path ? path : KILN_NN_REFS);
    if (!in) {
      throw Error(str("cannot open the nn reference file ", path ? path : KILN_NN_REFS,
                      "; run tests/oracle/gen_nn_refs.py (the build does)"));
    }
    return json::parse(in);
  }();
  return refs;
}

std::vector<size_t> nn_ref_rows(const char* section) {
  std::vector<size_t> rows(nn_refs()[section].size());
  for (size_t i = 0; i < rows.size(); ++i)
    rows[i] = i;
  return rows;
}

void expect_matches(const Tensor& actual, const json& expected, double rtol, double atol,
                    const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what << " is undefined";
  ASSERT_EQ(actual.shape(), expected["shape"].get<IntList>()) << what;
  auto values = actual.to_vector<double>();
  const json& data = expected["data"];
  for (size_t i = 0; i < values.size(); ++i) {
    double want = json_number(data[i]);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(values[i])) << what << "[" << i << "] = " << values[i] << ", want nan";
      continue;
    }
    EXPECT_NEAR(values[i], want, atol + rtol * std::abs(want)) << what << "[" << i << "]";
  }
}

}  // namespace kiln
