// Packed copies of the weights eager products read, kept across calls as
// compiled plans keep theirs (Note [Eager packed weights] in
// packed_weights.cpp).
#pragma once

#include <cstdint>
#include <memory>

#include "kiln/kernels/cpu/gemm_f32.h"
#include "kiln/ops/op.h"

namespace kiln {

// The packed form of `b`, a view of `issued`'s storage at the version the
// op was issued at, to run a product that reads b once
// (cpu::gemm_reads_b_once) with (cpu::gemm_f32_packed); null
// when the caller should pack it for this call only (cpu::gemm_f32): the
// first time this view is seen at this version, memory kiln does not own
// or has lent, or a cache turned off or too small for it.
std::shared_ptr<const cpu::PackedB> eager_packed_weight(const IssuedStorage& issued,
                                                        const cpu::GemmB& b);

struct EagerWeightCacheStats {
  int64_t hits = 0;     // calls that used a packed copy made before
  int64_t packs = 0;    // packed copies made
  int64_t entries = 0;  // views the cache knows now, packed or seen once
  int64_t bytes = 0;    // held by packed copies now
  int64_t max_bytes = 0;
};

// At most `max_bytes` of packed copies (the least recently used go first);
// 0 turns the cache off and frees what it holds.
void set_eager_weight_cache_limit(int64_t max_bytes);
EagerWeightCacheStats eager_weight_cache_stats();
// Frees every packed copy (the counts stay).
void clear_eager_weight_cache();

}  // namespace kiln
