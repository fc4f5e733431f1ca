// Helpers shared by the C++ tests.
#pragma once

#include <gtest/gtest.h>

#include <string>

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
