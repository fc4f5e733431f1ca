// Random numbers: Philox-4x32-10, a counter-based generator. The stream is a
// pure function of (seed, counter), computed with integer arithmetic only, so
// every compiler and platform produces the same bits.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>

#include "kiln/core/engine_var.h"

namespace kiln {

// One Philox block: 4 random 32-bit words for a 128-bit counter and 64-bit key.
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, uint64_t key);

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}

  void manual_seed(uint64_t seed);
  uint64_t seed() const { return seed_; }

  // Reserves `n_blocks` Philox blocks and returns the first block's index, so
  // a kernel can draw them itself (in parallel, in any order) and still
  // produce the same stream as a serial draw.
  uint64_t reserve_blocks(uint64_t n_blocks);

  // The index of the next block to be reserved: with set_offset, a caller
  // that must run random ops without consuming the stream (compiling a
  // graph's backward replays its forward once) puts the position back.
  uint64_t offset();
  void set_offset(uint64_t next_block);

  // Words of block `block_index` under this generator's key.
  std::array<uint32_t, 4> block(uint64_t block_index) const;

  // Random ops pushed to the engine write this variable, so they draw in
  // the order they were issued; the calls above wait for them when made
  // from outside a running op (the stream stays the one sync mode draws).
  EngineVarSlot& engine_var() { return engine_var_; }

 private:
  EngineVarSlot engine_var_;
  std::mutex mutex_;
  uint64_t seed_;
  uint64_t next_block_ = 0;
};

Generator& default_generator();
void manual_seed(uint64_t seed);

// Conversions from random words to numbers.
inline float uniform_float(uint32_t word) {
  return float(word >> 8) * (1.0f / 16777216.0f);
}
inline double uniform_double(uint32_t hi, uint32_t lo) {
  uint64_t bits = (uint64_t(hi) << 21) ^ (uint64_t(lo) >> 11);  // 53 random bits
  return double(bits) * (1.0 / 9007199254740992.0);
}

// Fill helpers over raw memory; each reserves its blocks from `gen`.
void fill_uniform(Generator& gen, float* out, int64_t n, double low, double high);
void fill_uniform(Generator& gen, double* out, int64_t n, double low, double high);
void fill_normal(Generator& gen, float* out, int64_t n, double mean, double stddev);
void fill_normal(Generator& gen, double* out, int64_t n, double mean, double stddev);
// Integers uniform in [low, high).
void fill_randint(Generator& gen, int64_t* out, int64_t n, int64_t low, int64_t high);

}  // namespace kiln
