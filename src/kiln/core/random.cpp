#include "kiln/core/random.h"

#include <cmath>

#include "kiln/util/error.h"

namespace kiln {
namespace {

constexpr uint32_t kMul0 = 0xD2511F53, kMul1 = 0xCD9E8D57;    // Philox round multipliers
constexpr uint32_t kWeyl0 = 0x9E3779B9, kWeyl1 = 0xBB67AE85;  // key schedule increments

inline void mul_hi_lo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  uint64_t product = uint64_t(a) * uint64_t(b);
  hi = uint32_t(product >> 32);
  lo = uint32_t(product);
}

}  // namespace

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> c, uint64_t key) {
  uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mul_hi_lo(kMul0, c[0], hi0, lo0);
    mul_hi_lo(kMul1, c[2], hi1, lo1);
    c = {hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0};
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return c;
}

void Generator::manual_seed(uint64_t seed) {
  engine_var_.wait_for_host_access();
  std::lock_guard<std::mutex> lock(mutex_);
  seed_ = seed;
  next_block_ = 0;
}

uint64_t Generator::reserve_blocks(uint64_t n_blocks) {
  engine_var_.wait_for_host_access();
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t first = next_block_;
  next_block_ += n_blocks;
  return first;
}

uint64_t Generator::offset() {
  engine_var_.wait_for_host_access();
  std::lock_guard<std::mutex> lock(mutex_);
  return next_block_;
}

void Generator::set_offset(uint64_t next_block) {
  engine_var_.wait_for_host_access();
  std::lock_guard<std::mutex> lock(mutex_);
  next_block_ = next_block;
}

std::array<uint32_t, 4> Generator::block(uint64_t index) const {
  return philox4x32({uint32_t(index), uint32_t(index >> 32), 0, 0}, seed_);
}

Generator& default_generator() {
  static Generator gen(0);
  return gen;
}

void manual_seed(uint64_t seed) {
  default_generator().manual_seed(seed);
}

namespace {

// Calls emit(i, words) for the words that produce element i; `words_per`
// elements share one block when each needs fewer than 4 words.
template <typename Emit>
void for_each_block(Generator& gen, int64_t n, int elems_per_block, Emit emit) {
  if (n <= 0) return;
  uint64_t blocks = uint64_t((n + elems_per_block - 1) / elems_per_block);
  uint64_t first = gen.reserve_blocks(blocks);
  for (uint64_t b = 0; b < blocks; ++b) {
    auto words = gen.block(first + b);
    for (int j = 0; j < elems_per_block; ++j) {
      int64_t i = int64_t(b) * elems_per_block + j;
      if (i < n) emit(i, words, j);
    }
  }
}

// Box-Muller over one block: two normals from four words.
template <typename T>
void normal_pair(const std::array<uint32_t, 4>& w, T& z0, T& z1) {
  double u1 = 1.0 - uniform_double(w[0], w[1]);  // (0, 1]: log stays finite
  double u2 = uniform_double(w[2], w[3]);
  double radius = std::sqrt(-2.0 * std::log(u1));
  double angle = 2.0 * M_PI * u2;
  z0 = T(radius * std::cos(angle));
  z1 = T(radius * std::sin(angle));
}

template <typename T>
void fill_uniform_impl(Generator& gen, T* out, int64_t n, double low, double high) {
  for_each_block(gen, n, 2, [&](int64_t i, const std::array<uint32_t, 4>& w, int j) {
    double u = uniform_double(w[2 * j], w[2 * j + 1]);
    out[i] = T(low + (high - low) * u);
  });
}

template <typename T>
void fill_normal_impl(Generator& gen, T* out, int64_t n, double mean, double stddev) {
  for_each_block(gen, n, 2, [&](int64_t i, const std::array<uint32_t, 4>& w, int j) {
    T z0, z1;
    normal_pair(w, z0, z1);
    out[i] = T(mean + stddev * double(j == 0 ? z0 : z1));
  });
}

}  // namespace

void fill_uniform(Generator& gen, float* out, int64_t n, double low, double high) {
  fill_uniform_impl(gen, out, n, low, high);
}
void fill_uniform(Generator& gen, double* out, int64_t n, double low, double high) {
  fill_uniform_impl(gen, out, n, low, high);
}
void fill_normal(Generator& gen, float* out, int64_t n, double mean, double stddev) {
  fill_normal_impl(gen, out, n, mean, stddev);
}
void fill_normal(Generator& gen, double* out, int64_t n, double mean, double stddev) {
  fill_normal_impl(gen, out, n, mean, stddev);
}

void fill_randint(Generator& gen, int64_t* out, int64_t n, int64_t low, int64_t high) {
  KILN_CHECK_VALUE(low < high, "randint: expected low < high, got low=", low, " high=", high);
  uint64_t range = uint64_t(high - low);
  for_each_block(gen, n, 2, [&](int64_t i, const std::array<uint32_t, 4>& w, int j) {
    uint64_t bits = (uint64_t(w[2 * j]) << 32) | w[2 * j + 1];
    out[i] = low + int64_t(bits % range);  // bias below 2^-32 for ranges under 2^32
  });
}

}  // namespace kiln
