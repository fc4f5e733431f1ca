#include "kiln/io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "kiln/core/factory.h"
#include "kiln/io/mapped_file.h"
#include "kiln/io/tensor_records.h"
#include "kiln/ops/copy.h"

namespace kiln::io {
namespace {

constexpr uint64_t kLengthBytes = 8;

const char* safetensors_dtype(DType dtype) {
  switch (dtype) {
    case DType::Bool:
      return "BOOL";
    case DType::Int8:
      return "I8";
    case DType::UInt8:
      return "U8";
    case DType::Int16:
      return "I16";
    case DType::Int32:
      return "I32";
    case DType::Int64:
      return "I64";
    case DType::Float32:
      return "F32";
    case DType::Float64:
      return "F64";
  }
  return "?";
}

DType dtype_from_safetensors(const std::string& name, const std::string& what) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (name == safetensors_dtype(DType(i))) return DType(i);
  KILN_CHECK_TYPE(false, what, ": dtype \"", name,
                  "\" is not one kiln has (BOOL, U8, I8, I16, I32, I64, F32, F64)");
  return DType::Float32;
}

uint64_t nbytes_of(const Tensor& tensor) {
  return uint64_t(tensor.numel()) * element_size(tensor.dtype());
}

}  // namespace

void save_safetensors(const nn::NamedTensors& tensors, const std::string& path,
                      const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<Tensor> contiguous_tensors;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    KILN_CHECK_VALUE(tensor.defined(), "save_safetensors: tensor '", name, "' is undefined");
    KILN_CHECK_VALUE(name != "__metadata__" && !header.contains(name),
                     "save_safetensors: the name '", name, "' is used twice or is reserved");
    uint64_t nbytes = nbytes_of(tensor);
    header[name] = {{"dtype", safetensors_dtype(tensor.dtype())},
                    {"shape", tensor.shape()},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    contiguous_tensors.push_back(contiguous(tensor));
  }
  std::string text = header.dump();
  // Spaces up to a multiple of 8 keep the data 8-byte aligned in the file
  // (the reference writer does the same), so loads can map it.
  text.append((8 - text.size() % 8) % 8, ' ');
  uint64_t length = text.size();

  AtomicFileWriter out(path);
  out.write(&length, sizeof length);
  out.write(text);
  for (const Tensor& tensor : contiguous_tensors)
    out.write(tensor.data_ptr(), nbytes_of(tensor));
  out.commit();
}

SafeTensors load_safetensors(const std::string& path) {
  std::shared_ptr<MappedFile> file = MappedFile::open(path);
  KILN_CHECK(file->size() >= kLengthBytes, path, ": not a safetensors file (", file->size(),
             " bytes)");
  uint64_t length;
  std::memcpy(&length, file->data(), sizeof length);
  KILN_CHECK(length <= file->size() - kLengthBytes, path, ": the header claims ", length,
             " bytes but the file has ", file->size() - kLengthBytes, " after its length");
  Json header = parse_json_header(file->bytes(kLengthBytes, length), path);
  json_object(header, path + ": header");
  const uint64_t data_begin = kLengthBytes + length;

  SafeTensors result;
  std::vector<TensorRecord> records;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      for (const auto& [key, value] : json_object(entry, path + ": __metadata__").items())
        result.metadata[key] = json_string(value, path + ": __metadata__." + key);
      continue;
    }
    std::string what = path + ": tensor '" + name + "'";
    TensorRecord record;
    record.name = name;
    record.dtype =
        dtype_from_safetensors(json_string(json_field(entry, "dtype", what), what), what);
    record.shape = json_shape(json_field(entry, "shape", what), what + ".shape");
    const Json& offsets = json_array(json_field(entry, "data_offsets", what), what);
    KILN_CHECK(offsets.size() == 2, what, ": data_offsets holds ", offsets.size(),
               " numbers, not 2");
    uint64_t begin = json_uint(offsets[0], what), end = json_uint(offsets[1], what);
    KILN_CHECK(begin <= end && end <= file->size() - data_begin, what, ": data_offsets [", begin,
               ", ", end, "] lie outside the data (", file->size() - data_begin, " bytes)");
    record.offset = data_begin + begin;
    record.nbytes = end - begin;
    records.push_back(std::move(record));
  }
  check_layout(records, data_begin, file->size(), 1, path);
  std::sort(records.begin(), records.end(),
            [](const TensorRecord& a, const TensorRecord& b) { return a.offset < b.offset; });
  // The format has no gaps: each tensor starts where the one before ends.
  uint64_t expected = data_begin;
  for (const TensorRecord& record : records) {
    KILN_CHECK(record.offset == expected, path, ": tensor '", record.name, "' starts at byte ",
               record.offset - data_begin, " of the data, not at ", expected - data_begin,
               " where the tensor before it ends");
    expected += record.nbytes;
  }
  KILN_CHECK(expected == file->size(), path, ": ", file->size() - expected,
             " bytes after the last tensor belong to none");

  for (const TensorRecord& record : records) {
    bool aligned = (record.offset % element_size(record.dtype)) == 0;
    Tensor view = aligned ? file->tensor(record.offset, record.shape, record.dtype) : Tensor();
    if (!aligned) {
      view = empty(record.shape, record.dtype);
      if (record.nbytes) std::memcpy(view.data_ptr(), file->data() + record.offset, record.nbytes);
    }
    result.tensors.emplace_back(record.name, std::move(view));
  }
  return result;
}

}  // namespace kiln::io
