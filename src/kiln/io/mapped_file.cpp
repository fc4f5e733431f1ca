#include "kiln/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kiln/core/factory.h"
#include "kiln/util/error.h"

namespace kiln::io {
namespace {

std::string system_error() {
  return std::strerror(errno);
}

// Closes a descriptor on every path out of open().
struct FdGuard {
  int fd;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::shared_ptr<MappedFile> MappedFile::open(const std::string& path) {
  FdGuard file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  KILN_CHECK(file.fd >= 0, "cannot open '", path, "': ", system_error());
  struct stat info {};
  KILN_CHECK(::fstat(file.fd, &info) == 0, "cannot read '", path, "': ", system_error());
  KILN_CHECK(S_ISREG(info.st_mode), "'", path, "' is not a regular file");
  size_t size = size_t(info.st_size);
  if (size == 0) return std::shared_ptr<MappedFile>(new MappedFile(path, nullptr, 0));
  // Private and writable: writes to tensors over the mapping copy the page.
  void* data = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, file.fd, 0);
  KILN_CHECK(data != MAP_FAILED, "cannot map '", path, "' (", size, " bytes): ", system_error());
  return std::shared_ptr<MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

std::string_view MappedFile::bytes(uint64_t offset, uint64_t length) const {
  KILN_CHECK(offset <= size_ && length <= size_ - offset, "'", path_, "': bytes [", offset, ", ",
             offset, " + ", length, ") lie outside the file (", size_, " bytes)");
  return {reinterpret_cast<const char*>(data()) + offset, size_t(length)};
}

Tensor MappedFile::tensor(uint64_t offset, const IntList& shape, DType dtype) {
  int64_t numel = 1;
  for (int64_t dim : shape)
    numel *= dim;
  uint64_t nbytes = uint64_t(numel) * element_size(dtype);
  bytes(offset, nbytes);  // checks the range
  KILN_CHECK(offset % element_size(dtype) == 0, "'", path_, "': a ", dtype,
             " tensor at byte offset ", offset, " is not aligned");
  void* start = static_cast<std::byte*>(data_) + offset;
  std::shared_ptr<MappedFile> keep_alive = shared_from_this();
  return from_blob(start, shape, dtype, [keep_alive] {});
}

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)) {
  temp_path_ = path_ + ".tmp-XXXXXX";
  fd_ = ::mkstemp(temp_path_.data());
  KILN_CHECK(fd_ >= 0, "cannot write '", path_, "': ", system_error());
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(temp_path_.c_str());
}

void AtomicFileWriter::write(const void* data, size_t size) {
  KILN_CHECK(fd_ >= 0, "'", path_, "' was already written");
  const char* next = static_cast<const char*>(data);
  size_t left = size;
  while (left > 0) {
    ssize_t written = ::write(fd_, next, left);
    if (written < 0 && errno == EINTR) continue;
    KILN_CHECK(written > 0, "cannot write '", path_, "': ", system_error());
    next += written;
    left -= size_t(written);
  }
  position_ += size;
}

void AtomicFileWriter::pad_to(uint64_t alignment) {
  static const char zeros[64] = {};
  while (position_ % alignment != 0) {
    uint64_t gap = alignment - position_ % alignment;
    write(zeros, size_t(std::min<uint64_t>(gap, sizeof zeros)));
  }
}

void AtomicFileWriter::commit() {
  KILN_CHECK(fd_ >= 0, "'", path_, "' was already written");
  // mkstemp makes the file 0600; a saved model is as readable as any file.
  mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd_, 0666 & ~mask);
  int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0 || ::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    std::string reason = system_error();
    ::unlink(temp_path_.c_str());
    KILN_CHECK(false, "cannot write '", path_, "': ", reason);
  }
}

}  // namespace kiln::io
