// Helpers shared by the C++ tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kiln/core/tensor.h"

#include "kiln/util/error.h"

namespace kiln {

// Runs `fn` and returns the kiln::Error it throws; fails the test when none.
template <typename Fn>
Error error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected a kiln::Error";
  return Error("(no error)");
}

// The message of the error `fn` throws.
template <typename Fn>
std::string error_text(Fn&& fn) {
  return error_of(std::forward<Fn>(fn)).what();
}

// Largest |got - want| / (1 + |want|) over all elements: a float32 result
// against its float64 reference.
inline double max_rel_error(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.shape(), want.shape());
  std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < g.size() && i < w.size(); ++i)
    worst = std::max(worst, std::fabs(g[i] - w[i]) / (1 + std::fabs(w[i])));
  return worst;
}

inline bool mentions(const Error& e, const std::string& text) {
  return std::string(e.what()).find(text) != std::string::npos;
}

}  // namespace kiln

// Expects `expr` to throw a kiln::Error whose message contains `text`.
#define EXPECT_THROW_WITH(expr, text)                                            \
  do {                                                                           \
    std::string thrown_message_ = ::kiln::error_text([&] { (void)(expr); });     \
    EXPECT_NE(thrown_message_.find(text), std::string::npos) << thrown_message_; \
  } while (0)
