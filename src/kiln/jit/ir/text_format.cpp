#include "kiln/jit/ir/text_format.h"

#include <charconv>

namespace kiln::jit {

std::string short_name(DType dtype) {
  switch (dtype) {
    case DType::Bool:
      return "bool";
    case DType::Int8:
      return "i8";
    case DType::UInt8:
      return "u8";
    case DType::Int16:
      return "i16";
    case DType::Int32:
      return "i32";
    case DType::Int64:
      return "i64";
    case DType::Float32:
      return "f32";
    case DType::Float64:
      return "f64";
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (int i = 0; i < kNumDTypes; ++i) {
    if (name == short_name(DType(i)) || name == to_string(DType(i))) return DType(i);
  }
  return std::nullopt;
}

std::string type_to_text(const TensorMeta& type) {
  return short_name(type.dtype) + kiln::to_string(type.shape);
}

namespace {
template <typename T>
std::string shortest(T value) {
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}
}  // namespace

std::string format_number(double value) {
  return shortest(value);
}

std::string format_number(float value) {
  return shortest(value);
}

std::string quote(std::string_view text) {
  static const char* hex = "0123456789abcdef";
  std::string out = "\"";
  for (char ch : text) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (ch == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string attr_value_to_text(const AttrValue& value) {
  struct Visitor {
    std::string operator()(std::monostate) const { return "None"; }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return format_number(d); }
    std::string operator()(const IntList& l) const { return kiln::to_string(l); }
    std::string operator()(DType d) const { return short_name(d); }
    std::string operator()(const std::string& s) const { return quote(s); }
    std::string operator()(const Dim& d) const { return d.to_string(); }
    std::string operator()(const DimList& l) const { return kiln::to_string(l); }
  };
  return std::visit(Visitor{}, value);
}

namespace {
bool all_digits(std::string_view text) {
  if (text.empty()) return false;
  for (char ch : text) {
    if (ch < '0' || ch > '9') return false;
  }
  return true;
}
}  // namespace

bool is_generated_name(std::string_view name) {
  if (all_digits(name)) return true;
  if (name.size() > 1 && name[0] == 'c' && all_digits(name.substr(1))) return true;
  return name.size() > 2 && name.substr(0, 2) == "in" && all_digits(name.substr(2));
}

bool is_bare_name(std::string_view name) {
  if (name.empty() || is_generated_name(name)) return false;
  for (char ch : name) {
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '.';
    if (!ok) return false;
  }
  return true;
}

// ---------------------------------------------------------------- ValueNames

ValueNames::ValueNames(const Graph& graph) {
  for (const Value* input : graph.inputs())
    user_names_.insert(input->name());
  for (const Value* param : graph.params())
    user_names_.insert(param->name());
  const auto& inputs = graph.inputs();
  for (size_t k = 0; k < inputs.size(); ++k) {
    const std::string& name = inputs[k]->name();
    assign(inputs[k], name.empty() ? str("%in", k) : unique(name));
  }
  for (const Value* param : graph.params())
    assign(param, unique(param->name()));
  const auto& constants = graph.constants();
  for (size_t k = 0; k < constants.size(); ++k)
    assign(constants[k], str("%c", k));
  size_t next = 0;
  for (const Node* node : graph.nodes()) {
    for (const Value* out : node->outputs())
      assign(out, str("%", next++));
  }
}

// Generated names (%0, %c0, %in0) never meet user names: a user name of that
// form is quoted. So only user names need to be made unique; a repeat gets
// the first suffix that no value is named.
std::string ValueNames::unique(const std::string& name) {
  auto free = [&](const std::string& candidate) {
    return !taken_.count(candidate) && (candidate == name || !user_names_.count(candidate));
  };
  std::string candidate = name;
  for (size_t suffix = 1; !free(candidate); ++suffix)
    candidate = name + "." + std::to_string(suffix);
  taken_.insert(candidate);
  std::string token = "%";
  token += is_bare_name(candidate) ? candidate : quote(candidate);
  return token;
}

void ValueNames::assign(const Value* value, const std::string& name) {
  names_.emplace(value, name);  // a value listed twice (a broken graph) keeps its first name
}

std::string ValueNames::operator()(const Value* value) const {
  if (!value) return "none";
  auto it = names_.find(value);
  if (it != names_.end()) return it->second;
  return "%<not in graph #" + std::to_string(value->id()) + ">";
}

}  // namespace kiln::jit
