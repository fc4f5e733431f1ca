// A file mapped into memory, copy-on-write: tensors over its bytes are
// ordinary, writable tensors (a write makes a private copy of that page and
// never reaches the file), and loading weights this way reads no byte twice
// and allocates nothing the size of the file.
//
//   auto file = io::MappedFile::open("model.kiln");
//   Tensor w = file->tensor(4096, {256, 512}, DType::Float32);  // no copy
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "kiln/core/tensor.h"

namespace kiln::io {

class MappedFile : public std::enable_shared_from_this<MappedFile> {
 public:
  // Throws kiln::Error naming the path when it cannot be opened or mapped
  // (absent, a directory, unreadable).
  static std::shared_ptr<MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const std::byte* data() const { return static_cast<const std::byte*>(data_); }
  size_t size() const { return size_; }
  std::string_view bytes(uint64_t offset, uint64_t length) const;

  // A tensor over [offset, offset + nbytes of shape and dtype) that keeps the
  // mapping alive. The range must lie in the file and be aligned for the
  // dtype (the caller validated both; this checks again).
  Tensor tensor(uint64_t offset, const IntList& shape, DType dtype);

 private:
  MappedFile(std::string path, void* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}

  std::string path_;
  void* data_;
  size_t size_;
};

// Writes `bytes` to `path` through a temporary file in the same folder that
// is renamed over it at the end, so a failure midway leaves any file already
// at `path` as it was. Throws kiln::Error naming the path.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter();  // removes the temporary file unless commit() ran
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, size_t size);
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
  void pad_to(uint64_t alignment);  // zero bytes up to a multiple of it
  uint64_t position() const { return position_; }
  void commit();

 private:
  std::string path_, temp_path_;
  int fd_ = -1;
  uint64_t position_ = 0;
};

}  // namespace kiln::io
