#include "kiln/ops/packed_weights.h"

#include <atomic>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kiln/core/storage.h"
#include "kiln/util/error.h"

namespace kiln {
namespace {

// Note [Eager packed weights]
// kiln's GEMM reads b packed into panels of 16 columns (kernels/cpu/
// gemm_f32.h). A compiled plan packs each weight once and again only when
// its storage's version moves (PreparedKernel::run_packed); an eager call
// packed it on every call: for a 512x512 linear layer 1 MB read across and
// 1 MB written, a sixth of the call at batch 32, and memory traffic that
// two branches running side by side (the async engine) compete for.
// Eager products now keep packed copies too, in one cache for all threads,
// where that pays: where the product reads b once, panel by panel
// (cpu::gemm_reads_b_once: up to 96 rows, or 256 with a's rows in 1 MiB).
// Where it sweeps b once per 96 rows, the per-call pack into a reused
// buffer was as fast or faster than a kept copy read from memory:
//
// - Keyed by the storage's id (never reused, unlike its address) and the
//   view (address, K, N, strides). Dispatch gives the kernel the storage
//   and its version as the op was issued (KernelArgs::packable): a queued
//   op reads the bytes of that version, since the engine runs it after the
//   writes issued before it and before those issued after it. Every kiln
//   in-place op, copy_, optimizer update and compiled plan's write bumps
//   the version as it is issued.
// - Memory lent to another library (a NumPy array or DLPack capsule over a
//   tensor, data_ptr() in Python) can be written there: it is never used
//   from the cache while lent, and a loan that ended makes what was packed
//   before it stale (StorageImpl::lend). Memory kiln does not own (from
//   NumPy, a file mapping) is never cached. A C++ program that writes
//   through data_ptr() must call bump_version(), as for compiled plans.
// - A view is packed into the cache the second time it is seen at the same
//   version; the first time, the call packs for itself as before. So an
//   activation used as b, or a weight in training (its version moves every
//   step), costs one lookup and is never packed twice. A storage's entries
//   go when it is freed (set_storage_freed_hook).
// - Packed copies hold at most max_bytes (64 MiB unless set), the least
//   recently used dropped first. A packed copy gives the same bits as
//   packing per call (gemm_f32.h), so eager results do not depend on it.
constexpr int64_t kDefaultMaxBytes = int64_t(64) << 20;

// One view of a storage the cache has seen, the state of the storage's
// bytes it was last seen at, and its packed copy once seen twice there.
struct Seen {
  cpu::GemmB view;  // data: the address, never read through here
  uint64_t version = 0, loans_ended = 0;
  std::shared_ptr<const cpu::PackedB> packed;
  uint64_t last_use = 0;

  bool is(const cpu::GemmB& b) const {
    return view.data == b.data && view.k == b.k && view.n == b.n && view.k_stride == b.k_stride &&
           view.n_stride == b.n_stride;
  }
};

class Cache {
 public:
  Cache() {
    set_storage_freed_hook([](uint64_t id) { instance().forget(id); });
  }

  static Cache& instance() {
    static Cache* cache = new Cache();  // never destroyed: storages are freed during exit too
    return *cache;
  }

  std::shared_ptr<const cpu::PackedB> get(const IssuedStorage& issued, const cpu::GemmB& b) {
    const int64_t max_bytes = max_bytes_.load(std::memory_order_relaxed);
    const StorageImpl& storage = *issued.storage;
    if (max_bytes == 0 || !storage.owned_by_kiln() || storage.lent()) return nullptr;
    const size_t bytes = cpu::PackedB::bytes_for(b);
    if (int64_t(bytes) > max_bytes) return nullptr;
    const uint64_t id = storage.id(), loans_ended = storage.loans_ended();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto [seen, fresh] = find_or_add(id, b);
      seen->last_use = ++tick_;
      const bool same_bytes =
          !fresh && seen->version == issued.version && seen->loans_ended == loans_ended;
      if (same_bytes && seen->packed) {
        ++hits_;
        return seen->packed;
      }
      if (!same_bytes) {  // seen now for the first time at this state: no copy kept
        drop_packed(*seen);
        seen->version = issued.version;
        seen->loans_ended = loans_ended;
        return nullptr;
      }
    }
    // The second time: packed outside the lock (a 1 MB weight takes about
    // 100 µs), so other threads' lookups do not wait for it.
    auto packed = std::make_shared<cpu::PackedB>();
    packed->pack(b);
    std::lock_guard<std::mutex> lock(mutex_);
    Seen* seen = find(id, b);
    // The storage may have moved on or gone meanwhile (this call still uses
    // its copy), or another call packed the same bytes first.
    if (!seen || seen->version != issued.version || seen->loans_ended != loans_ended) return packed;
    if (seen->packed) return seen->packed;
    seen->packed = packed;
    bytes_ += int64_t(packed->bytes());
    ++packs_;
    evict_beyond(max_bytes, seen);
    return packed;
  }

  void forget(uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = by_storage_.find(id);
    if (it == by_storage_.end()) return;
    for (Seen& seen : it->second)
      drop_packed(seen);
    entries_ -= int64_t(it->second.size());
    by_storage_.erase(it);
  }

  void set_limit(int64_t max_bytes) {
    KILN_CHECK_VALUE(max_bytes >= 0, "set_eager_weight_cache_limit: expected max_bytes >= 0, got ",
                     max_bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    max_bytes_.store(max_bytes, std::memory_order_relaxed);
    evict_beyond(max_bytes, nullptr);
  }

  EagerWeightCacheStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return {hits_, packs_, entries_, bytes_, max_bytes_.load(std::memory_order_relaxed)};
  }

  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    evict_beyond(0, nullptr);
  }

 private:
  std::pair<Seen*, bool> find_or_add(uint64_t id, const cpu::GemmB& b) {
    if (Seen* seen = find(id, b)) return {seen, false};
    std::vector<Seen>& views = by_storage_[id];
    views.push_back(Seen{.view = b});
    ++entries_;
    return {&views.back(), true};
  }

  Seen* find(uint64_t id, const cpu::GemmB& b) {
    auto it = by_storage_.find(id);
    if (it == by_storage_.end()) return nullptr;
    for (Seen& seen : it->second) {
      if (seen.is(b)) return &seen;
    }
    return nullptr;
  }

  void drop_packed(Seen& seen) {
    if (!seen.packed) return;
    bytes_ -= int64_t(seen.packed->bytes());
    seen.packed.reset();  // a call still using it keeps it alive
  }

  // Drops the least recently used packed copies, never `keep`, until the
  // rest fit in max_bytes.
  void evict_beyond(int64_t max_bytes, const Seen* keep) {
    while (bytes_ > max_bytes) {
      Seen* oldest = nullptr;
      for (auto& [id, views] : by_storage_) {
        for (Seen& seen : views) {
          if (seen.packed && &seen != keep && (!oldest || seen.last_use < oldest->last_use))
            oldest = &seen;
        }
      }
      if (!oldest) return;
      drop_packed(*oldest);
    }
  }

  std::mutex mutex_;
  std::unordered_map<uint64_t, std::vector<Seen>> by_storage_;
  std::atomic<int64_t> max_bytes_{kDefaultMaxBytes};
  int64_t bytes_ = 0, hits_ = 0, packs_ = 0, entries_ = 0;
  uint64_t tick_ = 0;
};

}  // namespace

std::shared_ptr<const cpu::PackedB> eager_packed_weight(const IssuedStorage& issued,
                                                        const cpu::GemmB& b) {
  return Cache::instance().get(issued, b);
}

void set_eager_weight_cache_limit(int64_t max_bytes) {
  Cache::instance().set_limit(max_bytes);
}

EagerWeightCacheStats eager_weight_cache_stats() {
  return Cache::instance().stats();
}

void clear_eager_weight_cache() {
  Cache::instance().clear();
}

}  // namespace kiln
