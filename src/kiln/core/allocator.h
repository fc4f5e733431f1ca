// The CPU allocator: 64-byte aligned blocks, with counters that tests use to
// prove nothing leaks and later passes use to check memory plans.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln {

inline constexpr size_t kAlignment = 64;

struct AllocatorStats {
  int64_t live_bytes = 0;  // allocated and not yet freed
  int64_t peak_bytes = 0;  // highest live_bytes since the last reset_peak
  int64_t live_blocks = 0;
  int64_t total_allocations = 0;  // ever made: a steady-state loop keeps this flat
};

void* cpu_allocate(size_t nbytes);  // never null; throws kiln::Error when out of memory
void cpu_free(void* ptr, size_t nbytes);

AllocatorStats allocator_stats();
void reset_peak_bytes();

}  // namespace kiln
