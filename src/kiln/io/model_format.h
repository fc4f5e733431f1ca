// What the writer and the reader of .kiln files (model_file.h) share: the
// fixed prefix, the roles a tensor plays, and the checksum.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/io/tensor_records.h"
#include "kiln/jit/compile/compiled.h"

namespace kiln::jit::model_format {

static_assert(std::endian::native == std::endian::little,
              "the .kiln format is little-endian and kiln reads it in place");

inline constexpr std::array<char, 8> kMagic = {'\x89', 'K', 'I', 'L', 'N', '\r', '\n', '\x1a'};
inline constexpr uint64_t kPrefixBytes = 32;
inline constexpr uint64_t kChecksummedPrefixBytes = 24;  // the checksum covers these + the header
inline constexpr uint64_t kAlignment = 64;

struct Prefix {
  std::array<char, 8> magic;
  uint32_t format_version;
  uint32_t reserved;
  uint64_t header_bytes;
  uint64_t header_checksum;
};
static_assert(sizeof(Prefix) == kPrefixBytes);

// The roles of the tensor records, in the order the writer lays them out.
inline constexpr std::string_view kParam = "param";
inline constexpr std::string_view kConstant = "constant";  // a graph constant stored as a blob
inline constexpr std::string_view kExampleInput = "example_input";
inline constexpr std::string_view kExampleOutput = "example_output";

// A graph without symbolic sizes or guards is written in version 1, which
// kilns from before the bump read too; version 2 adds symbolic graphs.
inline constexpr uint32_t kStaticFormatVersion = 1;
inline constexpr uint32_t kSymbolicFormatVersion = 2;
// The oldest version that holds `graph`.
uint32_t format_version_for(const Graph& graph);

// A graph's guards as the header keeps them (version 2): a list of
// {"lhs": "seq", "relation": "<=", "rhs": "128", "reason": "..."}, the sizes
// in the IR's text form (parse_size_expr reads them back).
io::Json guards_to_json(const std::vector<ShapeGuard>& guards);
// The guards of such a list; an error naming `what` and the faulty entry.
std::vector<ShapeGuard> guards_from_json(const io::Json& list, const std::string& what);

// Constants with more elements than this leave the graph text for a blob.
inline constexpr int64_t kInlineConstantLimit = 16;

uint64_t checksum(const void* data, size_t size);
// Of the checksummed part of the prefix followed by the header.
uint64_t header_checksum(const Prefix& prefix, std::string_view header);
std::string to_hex(uint64_t value);

inline uint64_t align_up(uint64_t offset) {
  return (offset + kAlignment - 1) / kAlignment * kAlignment;
}

// Runs the model on `inputs` without grad. A model that writes its own state
// (BatchNorm's running statistics in training mode) runs on a copy of its
// parameters, so saving or verifying an example changes nothing.
std::vector<Tensor> run_example(const CompiledFunction& compiled,
                                const std::vector<Tensor>& inputs);

}  // namespace kiln::jit::model_format
