#include "kiln/data/datasets.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "kiln/core/factory.h"
#include "kiln/data/file_io.h"
#include "kiln/ops/view.h"

namespace kiln {
namespace {

// ---- digits: CSV rows of 64 pixels and a label ----

constexpr int64_t kDigitsPixels = 64;

// Parses one comma-separated row of integers; false when it is not one.
bool parse_csv_row(const char* begin, const char* end, std::vector<int64_t>& out) {
  out.clear();
  const char* p = begin;
  while (p < end) {
    while (p < end && (*p == ' ' || *p == '\r'))
      ++p;
    // scikit-learn writes the values as "0.0", "16.0": accept a zero fraction.
    int64_t value;
    auto [next, ec] = std::from_chars(p, end, value);
    if (ec != std::errc()) return false;
    p = next;
    if (p < end && *p == '.') {
      ++p;
      while (p < end && *p == '0')
        ++p;
    }
    while (p < end && (*p == ' ' || *p == '\r'))
      ++p;
    out.push_back(value);
    if (p == end) return true;
    if (*p != ',') return false;
    ++p;
  }
  return !out.empty();
}

// ---- IDX: big-endian header, then unsigned bytes ----

uint32_t read_be32(const unsigned char* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

std::string hex32(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", value);
  return text;
}

std::string find_idx_file(const std::string& dir, const std::string& name) {
  std::string plain = dir + "/" + name;
  if (file_exists(plain)) return plain;
  if (file_exists(plain + ".gz")) return plain + ".gz";
  throw Error(str("Fashion-MNIST: neither ", plain, " nor ", plain,
                  ".gz exists (Debian's dataset-fashion-mnist package installs them in ",
                  kDebianFashionMnistDir, ")"));
}

}  // namespace

LabeledImages load_digits(const std::string& path, double scale) {
  std::vector<unsigned char> bytes = read_maybe_gzip(path);
  const char* text = reinterpret_cast<const char*>(bytes.data());
  const char* end = text + bytes.size();
  std::vector<float> pixels;
  std::vector<int64_t> labels, row;
  int64_t line_number = 0;
  for (const char* line = text; line < end;) {
    const char* newline = std::find(line, end, '\n');
    ++line_number;
    bool blank = std::all_of(line, newline, [](char c) { return c == ' ' || c == '\r'; });
    if (!blank) {
      KILN_CHECK_VALUE(parse_csv_row(line, newline, row), "load_digits: ", path, " line ",
                       line_number, " is not a row of comma-separated integers");
      KILN_CHECK_VALUE(int64_t(row.size()) == kDigitsPixels + 1, "load_digits: ", path, " line ",
                       line_number, " has ", row.size(), " values, expected ", kDigitsPixels + 1,
                       " (64 pixels and a label)");
      for (int64_t i = 0; i < kDigitsPixels; ++i) {
        KILN_CHECK_VALUE(row[i] >= 0 && row[i] <= 16, "load_digits: ", path, " line ", line_number,
                         " has pixel value ", row[i], " outside 0..16");
        pixels.push_back(float(double(row[i]) * scale));
      }
      KILN_CHECK_VALUE(row.back() >= 0 && row.back() <= 9, "load_digits: ", path, " line ",
                       line_number, " has label ", row.back(), " outside 0..9");
      labels.push_back(row.back());
    }
    line = newline == end ? end : newline + 1;
  }
  int64_t n = int64_t(labels.size());
  KILN_CHECK_VALUE(n > 0, "load_digits: ", path, " holds no rows");
  return {tensor(pixels, {n, kDigitsPixels}), tensor(labels, {n})};
}

namespace {

// An IDX file checked against its header: the dims and the value bytes.
struct IdxFile {
  IntList shape;
  std::vector<unsigned char> bytes;
  size_t header = 0;
  const unsigned char* values() const { return bytes.data() + header; }
};

IdxFile read_idx_ubyte(const std::string& path) {
  IdxFile file;
  file.bytes = read_maybe_gzip(path);
  const std::vector<unsigned char>& bytes = file.bytes;
  KILN_CHECK_VALUE(bytes.size() >= 4, path, " is too short to be an IDX file (", bytes.size(),
                   " bytes)");
  uint32_t magic = read_be32(bytes.data());
  int64_t ndim = magic & 0xff;
  KILN_CHECK_VALUE((magic >> 8) == 0x08 && ndim >= 1 && ndim <= 4, path,
                   " is not an IDX file of unsigned bytes: magic ", hex32(magic),
                   ", expected 0x0000080N");
  file.header = 4 + 4 * size_t(ndim);
  KILN_CHECK_VALUE(bytes.size() >= file.header, path, " is truncated inside its IDX header");
  int64_t count = 1;
  for (int64_t d = 0; d < ndim; ++d) {
    file.shape.push_back(int64_t(read_be32(bytes.data() + 4 + 4 * d)));
    count *= file.shape.back();
  }
  int64_t payload = int64_t(bytes.size() - file.header);
  KILN_CHECK_VALUE(payload == count, path, " holds ", payload, " data bytes but its header says ",
                   file.shape, " (", count, " bytes)", payload < count ? ": truncated" : "");
  return file;
}

}  // namespace

Tensor load_idx_ubyte(const std::string& path, double scale) {
  IdxFile file = read_idx_ubyte(path);
  Tensor out = empty(file.shape, DType::Float32);
  float* dst = out.data<float>();
  const unsigned char* src = file.values();
  float factor = float(scale);
  for (int64_t i = 0; i < out.numel(); ++i)
    dst[i] = float(src[i]) * factor;
  return out;
}

LabeledImages load_fashion_mnist(const std::string& dir, bool train) {
  std::string prefix = train ? "train" : "t10k";
  std::string images_path = find_idx_file(dir, prefix + "-images-idx3-ubyte");
  std::string labels_path = find_idx_file(dir, prefix + "-labels-idx1-ubyte");
  Tensor images = load_idx_ubyte(images_path, 1.0 / 255.0);
  KILN_CHECK_VALUE(images.dim() == 3 && images.size(1) == 28 && images.size(2) == 28, images_path,
                   " holds images of shape ", images.shape(), ", expected [N, 28, 28]");
  IdxFile labels_file = read_idx_ubyte(labels_path);
  int64_t n = images.size(0);
  KILN_CHECK_VALUE(labels_file.shape == IntList{n}, labels_path, " holds labels of shape ",
                   labels_file.shape, " for ", n, " images in ", images_path);
  Tensor labels = empty({n}, DType::Int64);
  int64_t* label_out = labels.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    label_out[i] = labels_file.values()[i];
    KILN_CHECK_VALUE(label_out[i] <= 9, labels_path, " has label ", label_out[i], " at index ", i,
                     ", outside 0..9");
  }
  return {reshape(images, {n, 1, 28, 28}), labels};
}

}  // namespace kiln
