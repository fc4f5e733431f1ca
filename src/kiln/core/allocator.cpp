#include "kiln/core/allocator.h"

#include <atomic>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <vector>

#include "kiln/util/error.h"
#include "kiln/util/profile_recorder.h"

namespace kiln {
namespace {

std::atomic<int64_t> g_live_bytes{0};
std::atomic<int64_t> g_peak_bytes{0};
std::atomic<int64_t> g_live_blocks{0};
std::atomic<int64_t> g_total_allocations{0};
std::atomic<int64_t> g_cache_hits{0};

void raise_peak(int64_t live) {
  int64_t peak = g_peak_bytes.load(std::memory_order_relaxed);
  while (live > peak && !g_peak_bytes.compare_exchange_weak(peak, live)) {
  }
}

size_t rounded_size(size_t nbytes) {
  // aligned_alloc wants a size that is a multiple of the alignment; a
  // zero-size tensor still gets a distinct, freeable block.
  size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  return rounded == 0 ? kAlignment : rounded;
}

// Freed large blocks by size. Only large blocks pass through here, so the
// lock is taken at most once per large allocation or free.
class BlockCache {
 public:
  void* take(size_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(size);
    if (it == blocks_.end()) return nullptr;
    void* ptr = it->second.back();
    it->second.pop_back();
    if (it->second.empty()) blocks_.erase(it);
    cached_bytes_ -= size;
    return ptr;
  }

  // Keeps the block unless that would pass the limit; then the largest
  // blocks kept so far go first (the likeliest to be stale: a batch size
  // that changed), and the block itself when it alone is too big.
  void put(void* ptr, size_t size) {
    std::vector<std::pair<void*, size_t>> evicted;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      while (cached_bytes_ + size > kCacheLimitBytes && !blocks_.empty()) {
        auto largest = std::prev(blocks_.end());
        evicted.emplace_back(largest->second.back(), largest->first);
        cached_bytes_ -= largest->first;
        largest->second.pop_back();
        if (largest->second.empty()) blocks_.erase(largest);
      }
      if (cached_bytes_ + size <= kCacheLimitBytes) {
        blocks_[size].push_back(ptr);
        cached_bytes_ += size;
        ptr = nullptr;
      }
    }
    for (auto [block, bytes] : evicted)
      std::free(block);
    std::free(ptr);  // outside the lock
  }

  void clear() {
    std::map<size_t, std::vector<void*>> blocks;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      blocks.swap(blocks_);
      cached_bytes_ = 0;
    }
    for (auto& [size, pointers] : blocks)
      for (void* ptr : pointers)
        std::free(ptr);
  }

  size_t cached_bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_bytes_;
  }

 private:
  std::mutex mutex_;
  std::map<size_t, std::vector<void*>> blocks_;
  size_t cached_bytes_ = 0;
};

// Never destroyed: tensors may still be freed while the process exits,
// after static destructors ran.
BlockCache& block_cache() {
  static BlockCache* cache = new BlockCache;
  return *cache;
}

// Freed small blocks (up to kSmallCachedMaxBytes), kept by the thread that
// freed them for its next request of that size. A compiled model at batch 1
// returns a new small tensor every call, and aligned_alloc's 64-byte
// alignment made glibc split a chunk for each and merge it back when freed:
// half of the executor's own time per call. Each thread keeps at most
// kSmallBlocksPerSize blocks of each size (68 KiB in all).
constexpr size_t kSmallSizes = kSmallCachedMaxBytes / kAlignment;
constexpr int kSmallBlocksPerSize = 8;

// Trivially destructible, so that it stays usable while the thread's other
// thread_locals are destroyed (they may free tensors): after the owner below
// has freed its blocks, `closed` sends every block straight back.
struct SmallBlocks {
  void* blocks[kSmallSizes][kSmallBlocksPerSize];
  int count[kSmallSizes];
  bool owner_made, closed;
};
thread_local SmallBlocks t_small_blocks{};

void release_small_blocks() {
  SmallBlocks& small = t_small_blocks;
  for (size_t size = 0; size < kSmallSizes; ++size) {
    for (int i = 0; i < small.count[size]; ++i)
      std::free(small.blocks[size][i]);
    small.count[size] = 0;
  }
}

// Frees the thread's small blocks when it exits.
struct SmallBlocksOwner {
  ~SmallBlocksOwner() {
    release_small_blocks();
    t_small_blocks.closed = true;
  }
};

void* take_small_block(size_t size) {
  SmallBlocks& small = t_small_blocks;
  int& count = small.count[size / kAlignment - 1];
  return count > 0 ? small.blocks[size / kAlignment - 1][--count] : nullptr;
}

// Whether the block was kept.
bool keep_small_block(void* ptr, size_t size) {
  SmallBlocks& small = t_small_blocks;
  if (small.closed) return false;
  if (!small.owner_made) {
    thread_local SmallBlocksOwner owner;  // made once per thread, destroyed at its exit
    small.owner_made = true;
  }
  int& count = small.count[size / kAlignment - 1];
  if (count == kSmallBlocksPerSize) return false;
  small.blocks[size / kAlignment - 1][count++] = ptr;
  return true;
}

}  // namespace

void* cpu_allocate(size_t nbytes) {
  // No machine has half the address space; refusing here also keeps the
  // rounding below from wrapping a huge request into a tiny block.
  KILN_CHECK(nbytes <= std::numeric_limits<size_t>::max() / 2, "out of memory: failed to allocate ",
             nbytes, " bytes");
  const size_t size = rounded_size(nbytes);
  void* ptr = nullptr;
  if (size <= kSmallCachedMaxBytes) {
    ptr = take_small_block(size);
  } else if (size >= kCachedMinBytes) {
    ptr = block_cache().take(size);
    if (ptr) g_cache_hits.fetch_add(1, std::memory_order_relaxed);
  }
  if (!ptr) {
    ptr = std::aligned_alloc(kAlignment, size);
    KILN_CHECK(ptr != nullptr, "out of memory: failed to allocate ", nbytes, " bytes");
  }
  int64_t live = g_live_bytes.fetch_add(int64_t(nbytes)) + int64_t(nbytes);
  raise_peak(live);
  g_live_blocks.fetch_add(1);
  g_total_allocations.fetch_add(1);
  if (profiler::recording()) profiler::record_memory(int64_t(nbytes));
  return ptr;
}

void cpu_free(void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  const size_t size = rounded_size(nbytes);
  if (size >= kCachedMinBytes) {
    block_cache().put(ptr, size);
  } else if (size > kSmallCachedMaxBytes || !keep_small_block(ptr, size)) {
    std::free(ptr);
  }
  g_live_bytes.fetch_sub(int64_t(nbytes));
  g_live_blocks.fetch_sub(1);
  if (profiler::recording()) profiler::record_memory(-int64_t(nbytes));
}

AllocatorStats allocator_stats() {
  return {g_live_bytes.load(),
          g_peak_bytes.load(),
          g_live_blocks.load(),
          g_total_allocations.load(),
          int64_t(block_cache().cached_bytes()),
          g_cache_hits.load()};
}

void reset_peak_bytes() {
  g_peak_bytes.store(g_live_bytes.load());
}

void release_cached_blocks() {
  block_cache().clear();
  release_small_blocks();
}

}  // namespace kiln
