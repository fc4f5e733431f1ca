#include "kiln/io/tensor_records.h"

#include <algorithm>

#include "kiln/util/error.h"

namespace kiln::io {

uint64_t checked_nbytes(DType dtype, const IntList& shape, std::string_view what) {
  constexpr uint64_t kLimit = uint64_t(1) << 62;
  uint64_t bytes = element_size(dtype);
  for (int64_t dim : shape) {
    KILN_CHECK(dim >= 0, what, ": negative dimension in shape ", shape);
    KILN_CHECK(dim == 0 || bytes <= kLimit / uint64_t(dim), what, ": shape ", shape, " of ", dtype,
               " holds more bytes than any file can");
    bytes *= uint64_t(dim);
  }
  return bytes;
}

void check_layout(const std::vector<TensorRecord>& records, uint64_t begin, uint64_t end,
                  uint64_t alignment, std::string_view file) {
  std::vector<const TensorRecord*> by_offset;
  for (const TensorRecord& record : records) {
    std::string what = std::string(file) + ": tensor '" + record.name + "'";
    uint64_t needed = checked_nbytes(record.dtype, record.shape, what);
    KILN_CHECK(record.nbytes == needed, what, " is ", record.dtype, record.shape, ", ", needed,
               " bytes, but its record says ", record.nbytes, " bytes");
    KILN_CHECK(
        record.offset >= begin && record.offset <= end && record.nbytes <= end - record.offset,
        what, ": bytes [", record.offset, ", +", record.nbytes, ") lie outside the data section [",
        begin, ", ", end, ")");
    KILN_CHECK((record.offset - begin) % alignment == 0, what, ": offset ", record.offset,
               " is not aligned to ", alignment, " bytes");
    by_offset.push_back(&record);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorRecord* a, const TensorRecord* b) { return a->offset < b->offset; });
  // Empty tensors own no bytes; the others must each start at or after the
  // end of every one before them.
  const TensorRecord* furthest = nullptr;
  for (const TensorRecord* record : by_offset) {
    if (record->nbytes == 0) continue;
    if (furthest) {
      KILN_CHECK(furthest->offset + furthest->nbytes <= record->offset, file, ": tensors '",
                 furthest->name, "' and '", record->name, "' overlap");
    }
    if (!furthest || record->offset + record->nbytes > furthest->offset + furthest->nbytes)
      furthest = record;
  }
}

const Json& json_object(const Json& value, std::string_view what) {
  KILN_CHECK(value.is_object(), what, ": expected a JSON object, got ", value.type_name());
  return value;
}

const Json& json_array(const Json& value, std::string_view what) {
  KILN_CHECK(value.is_array(), what, ": expected a JSON array, got ", value.type_name());
  return value;
}

const Json* json_optional_field(const Json& object, const char* key, std::string_view what) {
  json_object(object, what);
  auto found = object.find(key);
  return found == object.end() ? nullptr : &*found;
}

const Json& json_field(const Json& object, const char* key, std::string_view what) {
  const Json* field = json_optional_field(object, key, what);
  KILN_CHECK(field, what, ": the field \"", key, "\" is missing");
  return *field;
}

uint64_t json_uint(const Json& value, std::string_view what) {
  KILN_CHECK(value.is_number_unsigned() || (value.is_number_integer() && value.get<int64_t>() >= 0),
             what, ": expected a non-negative integer, got ", value.dump());
  return value.get<uint64_t>();
}

std::string json_string(const Json& value, std::string_view what) {
  KILN_CHECK(value.is_string(), what, ": expected a string, got ", value.type_name());
  return value.get<std::string>();
}

IntList json_shape(const Json& value, std::string_view what) {
  json_array(value, what);
  KILN_CHECK(value.size() <= 64, what, ": a shape of ", value.size(), " dimensions");
  IntList shape;
  for (const Json& dim : value) {
    uint64_t size = json_uint(dim, what);
    KILN_CHECK(size <= (uint64_t(1) << 62), what, ": dimension ", size, " is too large");
    shape.push_back(int64_t(size));
  }
  return shape;
}

Json parse_json_header(std::string_view bytes, std::string_view file) {
  try {
    return Json::parse(bytes.begin(), bytes.end());
  } catch (const Json::exception& e) {
    KILN_CHECK(false, file, ": the header is not valid JSON (", e.what(), ")");
  }
  return {};
}

}  // namespace kiln::io
