#include "kiln/core/dtype.h"

#include <algorithm>

#include "kiln/util/error.h"

namespace kiln {

size_t element_size(DType dtype) {
  switch (dtype) {
    case DType::Bool:
    case DType::Int8:
    case DType::UInt8:
      return 1;
    case DType::Int16:
      return 2;
    case DType::Int32:
      return 4;
    case DType::Int64:
      return 8;
    case DType::Float32:
      return 4;
    case DType::Float64:
      return 8;
  }
  return 0;
}

std::string to_string(DType dtype) {
  switch (dtype) {
    case DType::Bool:
      return "bool";
    case DType::Int8:
      return "int8";
    case DType::UInt8:
      return "uint8";
    case DType::Int16:
      return "int16";
    case DType::Int32:
      return "int32";
    case DType::Int64:
      return "int64";
    case DType::Float32:
      return "float32";
    case DType::Float64:
      return "float64";
  }
  return "?";
}

DType dtype_from_string(const std::string& name) {
  for (int i = 0; i < kNumDTypes; ++i) {
    if (to_string(DType(i)) == name) return DType(i);
  }
  KILN_CHECK_TYPE(false, "unknown dtype '", name, "'");
  return DType::Float32;
}

DTypeCategory category(DType dtype) {
  if (dtype == DType::Bool) return DTypeCategory::Bool;
  return is_floating(dtype) ? DTypeCategory::Floating : DTypeCategory::Integral;
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (category(a) != category(b)) return category(a) > category(b) ? a : b;
  // Unsigned with signed: the signed type when it is wider, else the signed
  // type of twice the width (uint8 is the only unsigned type).
  if (is_unsigned(a) != is_unsigned(b)) {
    DType signed_one = is_unsigned(a) ? b : a;
    return element_size(signed_one) > 1 ? signed_one : DType::Int16;
  }
  return element_size(a) >= element_size(b) ? a : b;
}

void ResultTypeState::add_tensor(DType dtype, bool zero_dim) {
  int& slot = zero_dim ? zero_ : dim_;
  slot = slot < 0 ? int(dtype) : int(promote_types(DType(slot), dtype));
}

void ResultTypeState::add_wrapped_number(DType dtype) {
  // A Python float takes the default float type, an int the default int type.
  if (is_floating(dtype)) dtype = kDefaultFloat;
  if (is_integral(dtype)) dtype = kDefaultInt;
  wrapped_ = wrapped_ < 0 ? int(dtype) : int(promote_types(DType(wrapped_), dtype));
}

namespace {

// `higher` wins unless `lower` is of a higher category.
int combine_priorities(int higher, int lower) {
  if (higher < 0) return lower;
  if (lower < 0) return higher;
  if (category(DType(lower)) > category(DType(higher))) {
    return int(promote_types(DType(higher), DType(lower)));
  }
  return higher;
}

}  // namespace

DType ResultTypeState::result() const {
  int combined = combine_priorities(dim_, combine_priorities(zero_, wrapped_));
  KILN_ASSERT(combined >= 0, "result type of no operands");
  return DType(combined);
}

}  // namespace kiln
