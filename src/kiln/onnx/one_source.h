// One source per translation: the generic translators (export_generic.cpp,
// import_generic.cpp) cover the ops whose OpDef declares a one-to-one ONNX
// form (OnnxInfo, ops/op.h); hand-written ones (export_*.cpp, import_*.cpp)
// the rest. An op with both is an error, so neither can silently win.
#pragma once

#include <string>
#include <unordered_map>

#include "kiln/util/error.h"

namespace kiln::onnx {

// Adds the generic translator of `key` (a kiln op name when exporting, an
// ONNX op type when importing) to a table that holds the hand-written ones;
// refuses a key the table has. `direction` is "export" or "import".
template <typename Fn>
void add_generic_translator(std::unordered_map<std::string, Fn>& table, const std::string& key,
                            Fn translate, const std::string& direction) {
  bool added = table.emplace(key, translate).second;
  KILN_CHECK(added, "onnx ", direction, ": '", key,
             "' has a hand-written translator and a one-to-one one that its OpDef declares "
             "(OnnxInfo, ops/op.h); keep one of them");
}

}  // namespace kiln::onnx
