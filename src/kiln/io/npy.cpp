#include "kiln/io/npy.h"

#include <algorithm>
#include <cstring>

#include "kiln/core/factory.h"
#include "kiln/io/mapped_file.h"
#include "kiln/io/tensor_records.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/view.h"

namespace kiln::io {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;

struct Descr {
  DType dtype;
  bool swap_bytes;
};

Descr parse_descr(const std::string& descr, const std::string& name) {
  KILN_CHECK(descr.size() == 3, name, ": unsupported dtype '", descr, "'");
  char order = descr[0];
  std::string kind = descr.substr(1);
  bool little = order == '<' || order == '|' || order == '=';
  KILN_CHECK(little || order == '>', name, ": unsupported byte order in dtype '", descr, "'");
  DType dtype;
  if (kind == "f4") {
    dtype = DType::Float32;
  } else if (kind == "f8") {
    dtype = DType::Float64;
  } else if (kind == "i1") {
    dtype = DType::Int8;
  } else if (kind == "u1") {
    dtype = DType::UInt8;
  } else if (kind == "i2") {
    dtype = DType::Int16;
  } else if (kind == "i4") {
    dtype = DType::Int32;
  } else if (kind == "i8") {
    dtype = DType::Int64;
  } else if (kind == "b1") {
    dtype = DType::Bool;
  } else {
    KILN_CHECK_TYPE(false, name, ": dtype '", descr,
                    "' is not one kiln has (float32/64, int8/16/32/64, uint8, bool)");
  }
  return {dtype, !little && element_size(dtype) > 1};
}

// The header is a Python dict literal; this reads the three keys NumPy
// writes, each as the text of its value.
std::string dict_value(std::string_view header, std::string_view key, const std::string& name) {
  std::string quoted = "'" + std::string(key) + "'";
  size_t at = header.find(quoted);
  KILN_CHECK(at != std::string_view::npos, name, ": the header has no ", quoted);
  at = header.find(':', at + quoted.size());
  KILN_CHECK(at != std::string_view::npos, name, ": no ':' after ", quoted);
  size_t begin = header.find_first_not_of(' ', at + 1);
  KILN_CHECK(begin != std::string_view::npos, name, ": no value after ", quoted);
  char open = header[begin];
  size_t end;
  if (open == '\'' || open == '(') {
    end = header.find(open == '(' ? ')' : '\'', begin + 1);
    KILN_CHECK(end != std::string_view::npos, name, ": unterminated value of ", quoted);
    return std::string(header.substr(begin, end - begin + 1));
  }
  end = header.find_first_of(",}", begin);
  KILN_CHECK(end != std::string_view::npos, name, ": unterminated value of ", quoted);
  return std::string(header.substr(begin, end - begin));
}

IntList parse_shape(const std::string& text, const std::string& name) {
  KILN_CHECK(text.size() >= 2 && text.front() == '(' && text.back() == ')', name, ": shape '", text,
             "' is not a tuple");
  IntList shape;
  std::string_view inner(text.data() + 1, text.size() - 2);
  size_t pos = 0;
  while (pos < inner.size()) {
    size_t comma = std::min(inner.find(',', pos), inner.size());
    std::string_view item = inner.substr(pos, comma - pos);
    item.remove_prefix(std::min(item.find_first_not_of(' '), item.size()));
    item = item.substr(0, item.find_last_not_of(' ') + 1);
    pos = comma + 1;
    if (item.empty()) continue;  // "(3,)"
    KILN_CHECK(item.size() <= 18 && std::all_of(item.begin(), item.end(), ::isdigit), name,
               ": shape '", text, "' holds '", item, "', not a size");
    shape.push_back(std::stoll(std::string(item)));
  }
  KILN_CHECK(shape.size() <= 64, name, ": shape '", text, "' has too many dimensions");
  return shape;
}

void swap_elements(void* data, int64_t count, size_t size) {
  auto* bytes = static_cast<unsigned char*>(data);
  for (int64_t i = 0; i < count; ++i)
    std::reverse(bytes + i * size, bytes + (i + 1) * size);
}

std::string descr_of(DType dtype) {
  switch (dtype) {
    case DType::Bool:
      return "|b1";
    case DType::Int8:
      return "|i1";
    case DType::UInt8:
      return "|u1";
    case DType::Int16:
      return "<i2";
    case DType::Int32:
      return "<i4";
    case DType::Int64:
      return "<i8";
    case DType::Float32:
      return "<f4";
    case DType::Float64:
      return "<f8";
  }
  return "?";
}

}  // namespace

Tensor parse_npy(std::string_view bytes, const std::string& name) {
  KILN_CHECK(bytes.size() >= kMagicBytes + 4 && bytes.substr(0, kMagicBytes) == kMagic, name,
             ": not a .npy file (the magic bytes differ)");
  unsigned major = static_cast<unsigned char>(bytes[6]);
  KILN_CHECK(major >= 1 && major <= 3, name, ": .npy format version ", major,
             " is not one kiln reads (1, 2, 3)");
  size_t length_bytes = major == 1 ? 2 : 4;
  KILN_CHECK(bytes.size() >= 8 + length_bytes, name, ": truncated .npy header");
  uint32_t header_length = 0;
  std::memcpy(&header_length, bytes.data() + 8, length_bytes);
  size_t data_begin = 8 + length_bytes + size_t(header_length);
  KILN_CHECK(data_begin <= bytes.size(), name, ": the header claims ", header_length,
             " bytes but the file is ", bytes.size(), " bytes");
  std::string_view header = bytes.substr(8 + length_bytes, header_length);

  std::string descr_text = dict_value(header, "descr", name);
  KILN_CHECK(descr_text.size() >= 2 && descr_text.front() == '\'' && descr_text.back() == '\'',
             name, ": descr ", descr_text, " is not a string");
  Descr descr = parse_descr(descr_text.substr(1, descr_text.size() - 2), name);
  std::string fortran = dict_value(header, "fortran_order", name);
  KILN_CHECK(fortran == "False" || fortran == "True", name, ": fortran_order is '", fortran, "'");
  IntList shape = parse_shape(dict_value(header, "shape", name), name);
  uint64_t nbytes = checked_nbytes(descr.dtype, shape, name);
  KILN_CHECK(nbytes == bytes.size() - data_begin, name, ": ", descr.dtype, shape, " needs ", nbytes,
             " bytes of data, the file holds ", bytes.size() - data_begin);

  // Fortran order is C order of the reversed shape, transposed back.
  bool fortran_order = fortran == "True";
  IntList stored_shape = shape;
  if (fortran_order) std::reverse(stored_shape.begin(), stored_shape.end());
  Tensor tensor = empty(stored_shape, descr.dtype);
  if (nbytes) std::memcpy(tensor.data_ptr(), bytes.data() + data_begin, nbytes);
  if (descr.swap_bytes) swap_elements(tensor.data_ptr(), tensor.numel(), element_size(descr.dtype));
  if (descr.dtype == DType::Bool) {
    auto* values = static_cast<unsigned char*>(tensor.data_ptr());
    for (int64_t i = 0; i < tensor.numel(); ++i)
      values[i] = values[i] != 0;
  }
  if (!fortran_order || shape.size() < 2) return tensor;
  IntList reversed_dims;
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d)
    reversed_dims.push_back(d);
  return contiguous(permute(tensor, reversed_dims));
}

Tensor read_npy(const std::string& path) {
  std::shared_ptr<MappedFile> file = MappedFile::open(path);
  return parse_npy(file->bytes(0, file->size()), path);
}

void write_npy(const Tensor& tensor, const std::string& path) {
  Tensor data = contiguous(tensor);
  std::string shape = "(";
  for (int64_t dim : data.shape())
    shape += std::to_string(dim) + ", ";
  if (data.dim() == 1) shape.resize(shape.size() - 1);  // "(3,)"
  if (data.dim() > 1) shape.resize(shape.size() - 2);
  shape += ")";
  std::string header = "{'descr': '" + descr_of(data.dtype()) +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Magic, version, length and header together fill a multiple of 64 bytes,
  // ending in a newline, as NumPy writes them.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  uint16_t length = uint16_t(header.size());

  AtomicFileWriter out(path);
  out.write(kMagic, kMagicBytes);
  out.write("\x01\x00", 2);
  out.write(&length, sizeof length);
  out.write(header);
  out.write(data.data_ptr(), size_t(data.numel()) * element_size(data.dtype()));
  out.commit();
}

}  // namespace kiln::io
