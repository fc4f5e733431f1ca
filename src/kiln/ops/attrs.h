// Typed op attributes. An op declares its attributes (name, kind, default);
// every call carries a full, ordered set, so kernels, printers and
// serializers never meet an untyped blob or a missing value.
#pragma once

#include <initializer_list>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "kiln/core/dim.h"
#include "kiln/core/dtype.h"
#include "kiln/util/int_list.h"

namespace kiln {

// monostate is "None" (an optional attribute left unset, e.g. clamp's max).
// An int or int[] attribute of a graph traced with dynamic shapes may hold
// symbolic sizes (a reshape target `[batch, 8, 64]`, a slice end `seq // 2`):
// then, and only then, it is a Dim or a DimList (see canonical_attr).
using AttrValue =
    std::variant<std::monostate, bool, int64_t, double, IntList, DType, std::string, Dim, DimList>;

enum class AttrKind { Bool, Int, Float, Ints, DType, String };
std::string to_string(AttrKind kind);
std::string attr_to_string(const AttrValue& value);  // "1", "2.5", "[1, 2]", "float32", "None"
// A static Dim as int64_t and an all-static DimList as IntList, so equal
// attributes have one representation.
AttrValue canonical_attr(AttrValue value);
// Whether a value mentions a size symbol.
bool attr_is_symbolic(const AttrValue& value);

struct AttrSpec {
  std::string name;
  AttrKind kind;
  AttrValue default_value;  // monostate: required unless `optional`
  bool optional = false;    // may be None
};

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> values) : values_(values) {}
  explicit Attrs(std::vector<std::pair<std::string, AttrValue>> values)
      : values_(std::move(values)) {}

  bool has(const std::string& name) const;  // present and not None
  const AttrValue& get(const std::string& name) const;
  bool get_bool(const std::string& name) const;
  // get_int and get_ints refuse a symbolic value (naming the attribute);
  // get_dim and get_dims take both.
  int64_t get_int(const std::string& name) const;
  Dim get_dim(const std::string& name) const;
  double get_float(const std::string& name) const;  // an int attr value is accepted too
  const IntList& get_ints(const std::string& name) const;
  DimList get_dims(const std::string& name) const;
  DType get_dtype(const std::string& name) const;
  const std::string& get_string(const std::string& name) const;

  void set(const std::string& name, AttrValue value);
  bool any_symbolic() const;
  // The attributes with every symbol bound to its value: what a kernel runs
  // with while a trace records the symbolic ones.
  Attrs evaluated(const std::map<std::string, int64_t>& bindings) const;
  const std::vector<std::pair<std::string, AttrValue>>& items() const { return values_; }
  bool operator==(const Attrs& other) const { return values_ == other.values_; }

 private:
  std::vector<std::pair<std::string, AttrValue>> values_;
};

}  // namespace kiln
