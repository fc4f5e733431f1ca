// Errors. Every check on user input goes through KILN_CHECK, which throws
// kiln::Error with a message built from its arguments; nothing on a user's
// path aborts the process.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

#include "kiln/util/int_list.h"

namespace kiln {

// Which Python exception a binding should raise for this error, following
// what PyTorch raises for the same mistake.
enum class ErrorKind { Runtime, Value, Type, Index, NotImplemented };

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string message)
      : std::runtime_error(std::move(message)), kind_(kind) {}
  explicit Error(std::string message) : Error(ErrorKind::Runtime, std::move(message)) {}

  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

namespace detail {

template <typename T>
concept Streamable = requires(std::ostream& os, const T& v) {
  os << v;
};

template <typename T>
void append_piece(std::ostringstream& os, const T& value) {
  if constexpr (Streamable<T>) {
    os << value;
  } else {
    os << to_string(value);  // found by argument-dependent lookup (DType, ...)
  }
}

}  // namespace detail

// Concatenates its arguments as text: str("got ", 3, " dims") == "got 3 dims".
template <typename... Args>
std::string str(const Args&... args) {
  std::ostringstream os;
  (detail::append_piece(os, args), ...);
  return os.str();
}

[[noreturn]] void throw_error(ErrorKind kind, const std::string& message);

}  // namespace kiln

#define KILN_CHECK_KIND(kind, cond, ...)                     \
  do {                                                       \
    if (!(cond)) [[unlikely]] {                              \
      ::kiln::throw_error((kind), ::kiln::str(__VA_ARGS__)); \
    }                                                        \
  } while (false)

// KILN_CHECK(x.dim() == 4, "conv2d: expected 4-D input, got shape ", x.shape());
#define KILN_CHECK(cond, ...) KILN_CHECK_KIND(::kiln::ErrorKind::Runtime, cond, __VA_ARGS__)
#define KILN_CHECK_VALUE(cond, ...) KILN_CHECK_KIND(::kiln::ErrorKind::Value, cond, __VA_ARGS__)
#define KILN_CHECK_TYPE(cond, ...) KILN_CHECK_KIND(::kiln::ErrorKind::Type, cond, __VA_ARGS__)
#define KILN_CHECK_INDEX(cond, ...) KILN_CHECK_KIND(::kiln::ErrorKind::Index, cond, __VA_ARGS__)

// Internal invariants (not user input): still a throw, never an abort.
#define KILN_ASSERT(cond, ...) \
  KILN_CHECK_KIND(::kiln::ErrorKind::Runtime, cond, "internal error: ", __VA_ARGS__)
