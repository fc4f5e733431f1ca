// Element types and PyTorch's type-promotion rules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kiln/util/error.h"

namespace kiln {

// Int8, UInt8 and Int16 come last so the values of the first five stay what
// they were; nothing may depend on the order (promote_types does not).
enum class DType : uint8_t { Bool, Int32, Int64, Float32, Float64, Int8, UInt8, Int16 };
inline constexpr int kNumDTypes = 8;

size_t element_size(DType dtype);
std::string to_string(DType dtype);                // "float32"
DType dtype_from_string(const std::string& name);  // throws on an unknown name

inline bool is_floating(DType d) {
  return d == DType::Float32 || d == DType::Float64;
}
// The integer types, bool excluded (PyTorch's is_integral(includeBool=false)).
inline bool is_integral(DType d) {
  return d == DType::Int8 || d == DType::UInt8 || d == DType::Int16 || d == DType::Int32 ||
         d == DType::Int64;
}
inline bool is_unsigned(DType d) {
  return d == DType::UInt8;
}

// The category ordering PyTorch uses when a Python scalar or a 0-d tensor
// meets a dimensioned tensor: bool < integral < floating.
enum class DTypeCategory { Bool, Integral, Floating };
DTypeCategory category(DType dtype);

// The smallest type that holds both (promote_types in PyTorch): uint8 with
// int8 gives int16, uint8 with a wider signed type gives that type.
DType promote_types(DType a, DType b);

inline constexpr DType kDefaultFloat = DType::Float32;
inline constexpr DType kDefaultInt = DType::Int64;

// The result type of an op over operands of three priorities: dimensioned
// tensors, 0-d tensors, and wrapped Python numbers. A lower-priority operand
// only changes the result when it is of a higher category.
class ResultTypeState {
 public:
  void add_tensor(DType dtype, bool zero_dim);
  void add_wrapped_number(DType dtype);
  DType result() const;

 private:
  int dim_ = -1, zero_ = -1, wrapped_ = -1;  // -1: no operand of that priority
};

// Maps a C++ element type to its DType: dtype_of<float>() == DType::Float32.
template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<bool>() {
  return DType::Bool;
}
template <>
constexpr DType dtype_of<int8_t>() {
  return DType::Int8;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::UInt8;
}
template <>
constexpr DType dtype_of<int16_t>() {
  return DType::Int16;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::Int32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::Int64;
}
template <>
constexpr DType dtype_of<float>() {
  return DType::Float32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::Float64;
}

}  // namespace kiln

namespace kiln {

// Calls the generic lambda `fn` with a value of the C++ type of `dtype`:
//   visit_dtype(dtype, [&](auto tag) { using T = decltype(tag); ... });
template <typename Fn>
decltype(auto) visit_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::Bool:
      return fn(bool{});
    case DType::Int8:
      return fn(int8_t{});
    case DType::UInt8:
      return fn(uint8_t{});
    case DType::Int16:
      return fn(int16_t{});
    case DType::Int32:
      return fn(int32_t{});
    case DType::Int64:
      return fn(int64_t{});
    case DType::Float64:
      return fn(double{});
    case DType::Float32:
      break;
  }
  return fn(float{});
}

// Only float32 and float64; the caller has checked the dtype is floating.
template <typename Fn>
decltype(auto) visit_floating(DType dtype, Fn&& fn) {
  if (dtype == DType::Float64) return fn(double{});
  KILN_ASSERT(dtype == DType::Float32, "expected a floating dtype, got ", to_string(dtype));
  return fn(float{});
}

// Everything but bool; the caller has checked the dtype is not bool.
template <typename Fn>
decltype(auto) visit_numeric(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::Int8:
      return fn(int8_t{});
    case DType::UInt8:
      return fn(uint8_t{});
    case DType::Int16:
      return fn(int16_t{});
    case DType::Int32:
      return fn(int32_t{});
    case DType::Int64:
      return fn(int64_t{});
    case DType::Float64:
      return fn(double{});
    case DType::Bool:
      KILN_ASSERT(false, "bool reached a numeric kernel");
    case DType::Float32:
      break;
  }
  return fn(float{});
}

}  // namespace kiln
