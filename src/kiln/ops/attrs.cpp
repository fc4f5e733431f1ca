#include "kiln/ops/attrs.h"

#include <algorithm>

#include "kiln/util/error.h"

namespace kiln {

std::string to_string(AttrKind kind) {
  switch (kind) {
    case AttrKind::Bool:
      return "bool";
    case AttrKind::Int:
      return "int";
    case AttrKind::Float:
      return "float";
    case AttrKind::Ints:
      return "int[]";
    case AttrKind::DType:
      return "dtype";
    case AttrKind::String:
      return "str";
  }
  return "?";
}

std::string attr_to_string(const AttrValue& value) {
  struct Visitor {
    std::string operator()(std::monostate) const { return "None"; }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return str(d); }
    std::string operator()(const IntList& l) const { return to_string(l); }
    std::string operator()(DType d) const { return to_string(d); }
    std::string operator()(const std::string& s) const { return "\"" + s + "\""; }
    std::string operator()(const Dim& d) const { return d.to_string(); }
    std::string operator()(const DimList& l) const { return to_string(l); }
  };
  return std::visit(Visitor{}, value);
}

AttrValue canonical_attr(AttrValue value) {
  if (const Dim* d = std::get_if<Dim>(&value); d && d->is_static()) return d->static_value();
  if (const DimList* l = std::get_if<DimList>(&value); l && is_static(*l)) return to_static(*l);
  return value;
}

bool attr_is_symbolic(const AttrValue& value) {
  if (const Dim* d = std::get_if<Dim>(&value)) return d->is_symbolic();
  if (const DimList* l = std::get_if<DimList>(&value)) return !is_static(*l);
  return false;
}

bool Attrs::has(const std::string& name) const {
  for (const auto& [key, value] : values_) {
    if (key == name) return !std::holds_alternative<std::monostate>(value);
  }
  return false;
}

const AttrValue& Attrs::get(const std::string& name) const {
  for (const auto& [key, value] : values_) {
    if (key == name) return value;
  }
  KILN_CHECK(false, "attribute '", name, "' is not set");
  return values_.front().second;
}

namespace {
template <typename T>
const T& get_as(const AttrValue& value, const std::string& name, const char* kind) {
  const T* p = std::get_if<T>(&value);
  KILN_CHECK(p != nullptr || !attr_is_symbolic(value), "attribute '", name,
             "' needs a concrete size here, got the symbolic ", attr_to_string(value));
  KILN_CHECK_TYPE(p != nullptr, "attribute '", name, "' is not of kind ", kind, " (got ",
                  attr_to_string(value), ")");
  return *p;
}
}  // namespace

bool Attrs::get_bool(const std::string& name) const {
  return get_as<bool>(get(name), name, "bool");
}
int64_t Attrs::get_int(const std::string& name) const {
  return get_as<int64_t>(get(name), name, "int");
}
double Attrs::get_float(const std::string& name) const {
  const AttrValue& v = get(name);
  if (const auto* i = std::get_if<int64_t>(&v)) return double(*i);
  return get_as<double>(v, name, "float");
}
const IntList& Attrs::get_ints(const std::string& name) const {
  return get_as<IntList>(get(name), name, "int[]");
}
Dim Attrs::get_dim(const std::string& name) const {
  const AttrValue& v = get(name);
  if (const Dim* d = std::get_if<Dim>(&v)) return *d;
  return get_as<int64_t>(v, name, "int");
}
DimList Attrs::get_dims(const std::string& name) const {
  const AttrValue& v = get(name);
  if (const DimList* l = std::get_if<DimList>(&v)) return *l;
  return to_dims(get_as<IntList>(v, name, "int[]"));
}
DType Attrs::get_dtype(const std::string& name) const {
  return get_as<DType>(get(name), name, "dtype");
}
const std::string& Attrs::get_string(const std::string& name) const {
  return get_as<std::string>(get(name), name, "str");
}

void Attrs::set(const std::string& name, AttrValue value) {
  value = canonical_attr(std::move(value));
  for (auto& [key, v] : values_) {
    if (key == name) {
      v = std::move(value);
      return;
    }
  }
  values_.emplace_back(name, std::move(value));
}

bool Attrs::any_symbolic() const {
  return std::any_of(values_.begin(), values_.end(),
                     [](const auto& kv) { return attr_is_symbolic(kv.second); });
}

Attrs Attrs::evaluated(const std::map<std::string, int64_t>& bindings) const {
  Attrs out = *this;
  for (auto& [key, value] : out.values_) {
    if (const Dim* d = std::get_if<Dim>(&value); d && d->is_symbolic()) {
      value = d->expr().evaluate(bindings);
    } else if (const DimList* l = std::get_if<DimList>(&value); l && !is_static(*l)) {
      value = evaluate(*l, bindings);
    }
  }
  return out;
}

}  // namespace kiln
