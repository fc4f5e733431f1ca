// The pieces of the IR text form that the printer, the parser, the verifier's
// messages and the DOT export share: short dtype names, types, numbers that
// round-trip exactly, quoted strings, and the names values print under.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "kiln/jit/ir/graph.h"

namespace kiln::jit {

// f32 f64 i32 i64 bool
std::string short_name(DType dtype);
// Accepts the short names and the long ones ("float32").
std::optional<DType> dtype_from_name(std::string_view name);

// "f32[2, 3]", "i64[]", "f32[batch, 2*seq]" (core/dim.h)
std::string type_to_text(const TensorMeta& type);

// The shortest text that reads back to the same number (std::to_chars):
// "2.5", "1e-05", "inf", "-nan".
std::string format_number(double value);
std::string format_number(float value);

// A double-quoted string literal: \" \\ \n \t \r and \xHH for other control
// bytes; other bytes (UTF-8 included) as they are.
std::string quote(std::string_view text);

// "1", "2.5", "[1, 2]", "f32", "\"tanh\"", "None"; symbolic sizes as their
// expressions: "seq // 2", "[batch, -1]"
std::string attr_value_to_text(const AttrValue& value);

// Whether `name` prints bare after '%': made of [A-Za-z0-9_.] and not of the
// forms the printer generates itself (%0, %c0, %in0).
bool is_bare_name(std::string_view name);
bool is_generated_name(std::string_view name);

// The name each value of a graph prints under, as the printer numbers them:
// inputs and parameters by name (%x, %layers.0.weight, %"odd name"), an
// unnamed input as %in<k>, constants as %c<k>, node outputs %0, %1, ... in
// node order. A name used twice prints with a ".1", ".2", ... suffix (the
// verifier rejects repeated names).
class ValueNames {
 public:
  explicit ValueNames(const Graph& graph);
  // A value of another graph (only a broken graph has one) prints as
  // %<not in graph #id>.
  std::string operator()(const Value* value) const;

 private:
  void assign(const Value* value, const std::string& name);
  std::string unique(const std::string& name);

  std::unordered_map<const Value*, std::string> names_;  // lookups only, never iterated
  std::unordered_set<std::string> user_names_;           // lookups only, never iterated
  std::unordered_set<std::string> taken_;                // lookups only, never iterated
};

}  // namespace kiln::jit
