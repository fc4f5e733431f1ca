// The CPU allocator: 64-byte aligned blocks, with counters that tests use to
// prove nothing leaks and later passes use to check memory plans.
//
// Large blocks (kCachedMinBytes and up) are kept when freed and handed out
// again for the next request of the same size, as MXNet's storage pool does:
// a training loop allocates the same gradients and activations every step,
// and giving such blocks back to the C library made it return them to the
// system and take page faults to get them again (a fifth of a compiled W1
// training step). At most kCacheLimitBytes are kept; release_cached_blocks()
// returns them all. Small blocks (up to kSmallCachedMaxBytes) are kept too,
// by the thread that freed them and for that thread only, a few of each size
// (a compiled model's result at batch 1 is one, every call); they are not in
// cached_bytes, and a thread's own go back when it exits or calls
// release_cached_blocks().
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln {

inline constexpr size_t kAlignment = 64;
inline constexpr size_t kCachedMinBytes = size_t(64) << 10;
inline constexpr size_t kCacheLimitBytes = size_t(256) << 20;
inline constexpr size_t kSmallCachedMaxBytes = 1024;

struct AllocatorStats {
  int64_t live_bytes = 0;  // allocated and not yet freed
  int64_t peak_bytes = 0;  // highest live_bytes since the last reset_peak
  int64_t live_blocks = 0;
  int64_t total_allocations = 0;  // ever made: a steady-state loop keeps this flat
  int64_t cached_bytes = 0;       // freed large blocks kept for reuse (not live)
  int64_t cache_hits = 0;         // allocations served from those
};

void* cpu_allocate(size_t nbytes);  // never null; throws kiln::Error when out of memory
void cpu_free(void* ptr, size_t nbytes);

AllocatorStats allocator_stats();
void reset_peak_bytes();
// Frees the cached blocks, and the small ones this thread keeps (the next
// allocations go to the C library).
void release_cached_blocks();

}  // namespace kiln
