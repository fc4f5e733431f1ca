// Helpers for the model-file and state-dict tests: temporary paths, raw
// bytes in and out, and rewriting a .kiln header with a valid checksum (so a
// test reaches the checks behind the checksum).
#pragma once

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "kiln/io/model_format.h"
#include "test_util.h"

namespace kiln::io_test {

// A folder removed with everything in it when the object goes.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "kiln-io-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// A .kiln file's parts: prefix, header JSON, and the data section.
struct KilnParts {
  jit::model_format::Prefix prefix;
  nlohmann::json header;
  std::string data;

  static KilnParts split(const std::string& bytes) {
    using namespace jit::model_format;
    KilnParts parts;
    std::memcpy(&parts.prefix, bytes.data(), sizeof parts.prefix);
    parts.header = nlohmann::json::parse(bytes.substr(kPrefixBytes, parts.prefix.header_bytes));
    parts.data = bytes.substr(align_up(kPrefixBytes + parts.prefix.header_bytes));
    return parts;
  }

  // The file again, with the header's length and checksum made to match
  // `header_text` (the JSON dumped, unless given).
  std::string join(std::string header_text = "") const {
    using namespace jit::model_format;
    if (header_text.empty()) header_text = header.dump();
    Prefix out = prefix;
    out.header_bytes = header_text.size();
    out.header_checksum = header_checksum(out, header_text);
    std::string bytes(reinterpret_cast<const char*>(&out), sizeof out);
    bytes += header_text;
    bytes.append(align_up(bytes.size()) - bytes.size(), '\0');
    return bytes + data;
  }
};

}  // namespace kiln::io_test
