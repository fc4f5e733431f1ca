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

  EngineVarSlot& engine_var() const { return engine_var_; }

 private:
  void* data_;
  size_t nbytes_;
  std::function<void()> release_;
  std::atomic<uint64_t> version_{0};
  mutable EngineVarSlot engine_var_;
};

using Storage = std::shared_ptr<StorageImpl>;

}  // namespace kiln
