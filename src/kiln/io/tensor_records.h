// What the JSON headers of kiln's two file formats (.kiln models and
// safetensors state dicts) say about each tensor, read with every length,
// count and offset checked: these headers come from files, and a file may
// have been cut short, corrupted, or written to make the reader misbehave.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/core/dtype.h"
#include "kiln/util/int_list.h"

namespace kiln::io {

using Json = nlohmann::json;

// Where a tensor's bytes lie in a file, and what they hold.
struct TensorRecord {
  std::string name;
  DType dtype = DType::Float32;
  IntList shape;
  uint64_t offset = 0;  // from the start of the file
  uint64_t nbytes = 0;
};

// The bytes of `dtype` x `shape`; throws naming `what` when a dimension is
// negative or the count overflows (no real tensor has 2^62 bytes).
uint64_t checked_nbytes(DType dtype, const IntList& shape, std::string_view what);

// Checks that every record lies within [begin, end) of a file of that many
// bytes, is aligned to `alignment` relative to `begin`, holds exactly the
// bytes its dtype and shape need, and overlaps no other record. `file` names
// the file in messages.
void check_layout(const std::vector<TensorRecord>& records, uint64_t begin, uint64_t end,
                  uint64_t alignment, std::string_view file);

// ---- reading JSON that came from a file: each throws kiln::Error naming
// `what` (where in the header the value was) and what was expected ----
const Json& json_field(const Json& object, const char* key, std::string_view what);
const Json* json_optional_field(const Json& object, const char* key, std::string_view what);
uint64_t json_uint(const Json& value, std::string_view what);
std::string json_string(const Json& value, std::string_view what);
IntList json_shape(const Json& value, std::string_view what);
const Json& json_array(const Json& value, std::string_view what);
const Json& json_object(const Json& value, std::string_view what);

// Parses a header's bytes; throws naming `file` on malformed JSON.
Json parse_json_header(std::string_view bytes, std::string_view file);

}  // namespace kiln::io
