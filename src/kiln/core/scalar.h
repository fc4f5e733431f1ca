// A Python-like number: bool, integer or floating. Used for scalar operands
// (x + 2.5), fill values and item().
#pragma once

#include <cstdint>
#include <string>

#include "kiln/core/dtype.h"
#include "kiln/core/element_cast.h"

namespace kiln {

class Scalar {
 public:
  Scalar() : Scalar(int64_t(0)) {}
  Scalar(double v) : kind_(DType::Float64), d_(v) {}
  Scalar(float v) : Scalar(double(v)) {}
  Scalar(int64_t v) : kind_(DType::Int64), i_(v) {}
  Scalar(int32_t v) : Scalar(int64_t(v)) {}
  Scalar(bool v) : kind_(DType::Bool), i_(v) {}

  // Float64, Int64 or Bool: the kind of number this is, as Python sees it.
  DType kind() const { return kind_; }
  bool is_floating() const { return kind_ == DType::Float64; }

  double to_double() const { return kind_ == DType::Float64 ? d_ : double(i_); }
  int64_t to_int() const { return kind_ == DType::Float64 ? int64_t(d_) : i_; }
  bool to_bool() const { return kind_ == DType::Float64 ? d_ != 0.0 : i_ != 0; }

  template <typename T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>) return to_bool();
    if constexpr (std::is_floating_point_v<T>) return T(to_double());
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      return kind_ == DType::Float64 ? element_cast<T>(d_) : T(i_);
    }
  }

 private:
  DType kind_;
  union {
    double d_;
    int64_t i_;
  };
};

std::string to_string(const Scalar& s);  // "2.5", "3", "True"

}  // namespace kiln
