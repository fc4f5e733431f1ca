#include "kiln/core/allocator.h"

#include <atomic>
#include <cstdlib>

#include "kiln/util/error.h"

namespace kiln {
namespace {

std::atomic<int64_t> g_live_bytes{0};
std::atomic<int64_t> g_peak_bytes{0};
std::atomic<int64_t> g_live_blocks{0};
std::atomic<int64_t> g_total_allocations{0};

void raise_peak(int64_t live) {
  int64_t peak = g_peak_bytes.load(std::memory_order_relaxed);
  while (live > peak && !g_peak_bytes.compare_exchange_weak(peak, live)) {
  }
}

}  // namespace

void* cpu_allocate(size_t nbytes) {
  // aligned_alloc wants a size that is a multiple of the alignment; a zero-size
  // tensor still gets a distinct, freeable block.
  size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) rounded = kAlignment;
  void* ptr = std::aligned_alloc(kAlignment, rounded);
  KILN_CHECK(ptr != nullptr, "out of memory: failed to allocate ", nbytes, " bytes");
  int64_t live = g_live_bytes.fetch_add(int64_t(nbytes)) + int64_t(nbytes);
  raise_peak(live);
  g_live_blocks.fetch_add(1);
  g_total_allocations.fetch_add(1);
  return ptr;
}

void cpu_free(void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  std::free(ptr);
  g_live_bytes.fetch_sub(int64_t(nbytes));
  g_live_blocks.fetch_sub(1);
}

AllocatorStats allocator_stats() {
  return {g_live_bytes.load(), g_peak_bytes.load(), g_live_blocks.load(),
          g_total_allocations.load()};
}

void reset_peak_bytes() {
  g_peak_bytes.store(g_live_bytes.load());
}

}  // namespace kiln
