// Reading whole data files, gzip-compressed or not: the datasets kiln loads
// ship as .gz in some packages and plain in others.
#pragma once

#include <string>
#include <vector>

namespace kiln {

// The bytes of `path`, decompressed when it is gzip (detected by its magic,
// not its name). A missing file, a read error, a corrupt or truncated gzip
// stream is a kiln::Error naming the file.
std::vector<unsigned char> read_maybe_gzip(const std::string& path);

bool file_exists(const std::string& path);

}  // namespace kiln
