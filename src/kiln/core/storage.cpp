#include "kiln/core/storage.h"

#include "kiln/core/allocator.h"

namespace kiln {
namespace {
std::atomic<uint64_t> g_next_storage_id{1};
std::atomic<StorageFreedHook> g_storage_freed_hook{nullptr};
}  // namespace

void set_storage_freed_hook(StorageFreedHook hook) {
  g_storage_freed_hook.store(hook, std::memory_order_release);
}

uint64_t StorageImpl::id() const {
  uint64_t id = id_.load(std::memory_order_acquire);
  if (id != 0) return id;
  const uint64_t fresh = g_next_storage_id.fetch_add(1, std::memory_order_relaxed);
  // Two threads may ask at once: the first to store wins, the other's
  // number is never used.
  return id_.compare_exchange_strong(id, fresh, std::memory_order_acq_rel) ? fresh : id;
}

StorageImpl::StorageImpl(size_t nbytes) : data_(cpu_allocate(nbytes)), nbytes_(nbytes) {}

StorageImpl::StorageImpl(void* data, size_t nbytes, std::function<void()> release)
    : data_(data), nbytes_(nbytes), release_(std::move(release)) {}

StorageImpl::~StorageImpl() {
  const uint64_t id = id_.load(std::memory_order_acquire);
  if (id != 0) {
    if (StorageFreedHook hook = g_storage_freed_hook.load(std::memory_order_acquire)) hook(id);
  }
  if (release_) {
    release_();
    return;
  }
  cpu_free(data_, nbytes_);
}

}  // namespace kiln
