#include "kiln/data/file_io.h"

#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <memory>

#include "kiln/util/error.h"

namespace kiln {
namespace {

std::vector<unsigned char> read_plain(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK(in.good(), "cannot open ", path);
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  KILN_CHECK(!in.bad(), "error reading ", path);
  return bytes;
}

bool has_gzip_magic(const std::vector<unsigned char>& bytes) {
  return bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b;
}

// Inflates the whole buffer with zlib's streaming API rather than gzread:
// gzread passes a stream that ends early through as a short read, and here a
// truncated file must be an error. Concatenated gzip members are accepted,
// as gzip(1) does.
std::vector<unsigned char> gunzip(const std::vector<unsigned char>& compressed,
                                  const std::string& path) {
  z_stream stream{};
  KILN_CHECK(inflateInit2(&stream, 16 + MAX_WBITS) == Z_OK, "zlib could not start on ", path);
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&stream, inflateEnd);
  std::vector<unsigned char> out;
  unsigned char chunk[1 << 16];
  stream.next_in = const_cast<Bytef*>(compressed.data());
  stream.avail_in = uInt(compressed.size());
  for (;;) {
    stream.next_out = chunk;
    stream.avail_out = sizeof(chunk);
    int status = inflate(&stream, Z_NO_FLUSH);
    out.insert(out.end(), chunk, chunk + (sizeof(chunk) - stream.avail_out));
    if (status == Z_STREAM_END) {
      if (stream.avail_in == 0) return out;
      KILN_CHECK(inflateReset(&stream) == Z_OK, "zlib could not restart on ", path);
      continue;  // another gzip member follows
    }
    KILN_CHECK(status == Z_OK || status == Z_BUF_ERROR, path,
               " is not valid gzip data (zlib: ", stream.msg ? stream.msg : "error", ")");
    KILN_CHECK(stream.avail_in > 0 || stream.avail_out == 0, path,
               " is truncated: the gzip stream ends early");
  }
}

}  // namespace

bool file_exists(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  std::fclose(f);
  return true;
}

std::vector<unsigned char> read_maybe_gzip(const std::string& path) {
  std::vector<unsigned char> bytes = read_plain(path);
  if (!has_gzip_magic(bytes)) return bytes;
  return gunzip(bytes, path);
}

}  // namespace kiln
