// Helpers for the compiled-vs-eager tests.
#pragma once

#include <gtest/gtest.h>

#include <cstring>

#include "kiln/ops/copy.h"

namespace kiln {

// Same dtype, same shape, and the same bytes element by element (NaN
// payloads and signed zeros included), whatever the two layouts.
inline testing::AssertionResult bitwise_equal(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype()) {
    return testing::AssertionFailure()
           << "dtype " << to_string(got.dtype()) << " vs " << to_string(want.dtype());
  }
  if (got.shape() != want.shape()) {
    return testing::AssertionFailure()
           << "shape " << to_string(got.shape()) << " vs " << to_string(want.shape());
  }
  const Tensor a = clone(got), b = clone(want);
  const size_t itemsize = a.itemsize();
  const char* pa = static_cast<const char*>(a.data_ptr());
  const char* pb = static_cast<const char*>(b.data_ptr());
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (std::memcmp(pa + size_t(i) * itemsize, pb + size_t(i) * itemsize, itemsize) != 0) {
      return testing::AssertionFailure()
             << "element " << i << " differs: " << read_element(a, i).to_double() << " vs "
             << read_element(b, i).to_double();
    }
  }
  return testing::AssertionSuccess();
}

}  // namespace kiln
