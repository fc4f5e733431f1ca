// Storage: a block of bytes shared by a tensor and all its views. It also
// holds the version counter, so every view of the same memory sees one count
// (PyTorch shares the counter between a tensor and its views the same way),
// and the dependency engine's variable, for the same reason: a write through
// any view orders against reads through every other.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "kiln/core/engine_var.h"

namespace kiln {

class StorageImpl {
 public:
  // Memory from the kiln allocator.
  explicit StorageImpl(size_t nbytes);
  // Memory owned by someone else (a NumPy array, a DLPack producer): `release`
  // runs when the last tensor drops it.
  StorageImpl(void* data, size_t nbytes, std::function<void()> release);
  ~StorageImpl();
  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  bool owned_by_kiln() const { return !release_; }

  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

  // A number no other storage of this process ever has, given on first
  // ask: caches of a storage's contents key on it, since an address is
  // reused once its storage is freed. The first ask also has the cache
  // told when this storage goes (set_storage_freed_hook).
  uint64_t id() const;

  // Memory lent to another library (a NumPy array or DLPack capsule over
  // it, its address given out) can be written there, where the version
  // counter does not see it. A cache of its contents trusts it only while
  // nothing is lent, and only as it was after the last loan ended
  // (Note [Eager packed weights], ops/packed_weights.h). An address given
  // out is lent for good (lend() with no end_loan()).
  void lend() { lent_.fetch_add(1, std::memory_order_acq_rel); }
  void end_loan() {
    loans_ended_.fetch_add(1, std::memory_order_acq_rel);
    lent_.fetch_sub(1, std::memory_order_acq_rel);
  }
  bool lent() const { return lent_.load(std::memory_order_acquire) != 0; }
  uint64_t loans_ended() const { return loans_ended_.load(std::memory_order_acquire); }

  EngineVarSlot& engine_var() const { return engine_var_; }

 private:
  void* data_;
  size_t nbytes_;
  std::function<void()> release_;
  std::atomic<uint64_t> version_{0};
  mutable std::atomic<uint64_t> id_{0};  // 0: none asked for yet
  std::atomic<uint32_t> lent_{0};
  std::atomic<uint64_t> loans_ended_{0};
  mutable EngineVarSlot engine_var_;
};

using Storage = std::shared_ptr<StorageImpl>;

// Called with the id of a storage that had one, as it is freed (the eager
// packed-weight cache, ops/packed_weights.cpp, drops what it kept for it).
using StorageFreedHook = void (*)(uint64_t id);
void set_storage_freed_hook(StorageFreedHook hook);

}  // namespace kiln
