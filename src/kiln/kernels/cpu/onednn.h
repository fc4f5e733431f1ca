// The process's oneDNN state: one CPU engine, one stream, and a cache of
// created primitives. Include only from kernel .cpp files: the oneDNN headers
// are a private dependency of kiln_kernels_cpu.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/kernels/cpu/parallel.h"
#include "kiln/kernels/cpu/strided.h"
#include "kiln/util/error.h"

namespace kiln::cpu::onednn {

dnnl::engine& engine();
dnnl::stream& stream();

// Attributes every kiln primitive is created with: the scratchpad is passed
// by the caller. oneDNN's own (library) scratchpad is one global buffer in
// Debian's build (no DNNL_ENABLE_CONCURRENT_EXEC), so two threads running
// primitives at once would corrupt each other's temporaries.
dnnl::primitive_attr default_attr();
// A per-thread scratchpad buffer big enough for `desc` (grown on demand).
dnnl::memory scratchpad(const dnnl::memory::desc& desc);

// Per-thread buffers for data reordered into the layout a primitive chose
// (weights, source, destination: one slot each): they must stay alive while
// the primitive (and its scratchpad) runs. Valid until the next call on the
// same thread with the same slot.
enum class ReorderSlot { Weights, Source, Destination };
dnnl::memory reorder_buffer(const dnnl::memory::desc& desc,
                            ReorderSlot slot = ReorderSlot::Weights);

// A reorder between two layouts of one tensor (kiln's plain one and the one
// a primitive chose), or nothing when they are the same.
class Reorder {
 public:
  Reorder() = default;
  Reorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to);
  bool needed() const { return needed_; }
  const dnnl::memory::desc& from() const { return from_; }
  const dnnl::memory::desc& to() const { return to_; }
  // `data` (in `from`'s layout) in `to`'s layout: the same memory when no
  // reorder is needed, else a copy in the per-thread buffer `slot`.
  dnnl::memory run(const void* data, ReorderSlot slot) const;
  // `source` (in `from`'s layout) reordered into `target`.
  void run_into(const dnnl::memory& source, const dnnl::memory& target) const;
  void run_into(const dnnl::memory& source, void* data) const;

 private:
  dnnl::memory::desc from_, to_;
  bool needed_ = false;
  dnnl::reorder reorder_;
  dnnl::memory::desc scratchpad_;
};

// One argument of a primitive; an empty memory marks an absent one (no bias).
struct ExecArg {
  int index;
  dnnl::memory memory;
};
// Runs `prim` on the stream and waits. Arguments go through the C API as a
// plain array, so a call builds no hash map.
void execute(const dnnl::primitive& prim, std::initializer_list<ExecArg> args);

// A plain (strided) float32 memory descriptor.
dnnl::memory::desc plain_desc(const dnnl::memory::dims& shape, const dnnl::memory::dims& strides);
dnnl::memory wrap(const dnnl::memory::desc& desc, const void* data);

// Builds cache keys out of numbers: key.add(m).add(n)...
class Key {
 public:
  Key& add(int64_t v) {
    bytes_.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  Key& add(const int64_t* v, int n) {
    bytes_.append(reinterpret_cast<const char*>(v), sizeof(int64_t) * size_t(n));
    return *this;
  }
  Key& add_double(double v) {
    bytes_.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

// Primitives are created once per key (shapes, strides, attributes) and
// shared by all threads: creating a primitive descriptor costs far more than
// running a small one. Bounded, so a stream of new shapes cannot grow it
// without limit. The key includes the thread count: oneDNN fixes a
// primitive's threads when creating it (and runs it on that many whatever
// the team size when it runs), so a step on one thread (OneThread) needs a
// primitive of its own.
template <typename Entry>
class PrimitiveCache {
 public:
  template <typename Make>
  Entry get(const Key& key, Make make) {
    Key keyed = key;
    keyed.add(int64_t(max_threads()));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = entries_.find(keyed.bytes());
      if (it != entries_.end()) return it->second;
    }
    Entry made = make();  // outside the lock: creation can take milliseconds
    std::lock_guard<std::mutex> lock(mutex_);
    if (entries_.size() >= kMaxEntries) entries_.clear();
    entries_.emplace(keyed.bytes(), made);
    return made;
  }

 private:
  static constexpr size_t kMaxEntries = 1024;
  std::mutex mutex_;
  std::unordered_map<std::string, Entry> entries_;
};

// Runs `body`, turning oneDNN's exceptions into kiln::Error naming `op`.
template <typename Body>
void guarded(const char* op, Body body) {
  try {
    body();
  } catch (const dnnl::error& e) {
    throw Error(str(op, ": oneDNN failed: ", e.what()));
  }
}

}  // namespace kiln::cpu::onednn

namespace kiln::cpu::onednn {

// v's float32 data, made contiguous in `storage` when v is not; the
// primitives used here are fastest (or only fast) on dense layouts.
const float* dense_f32(const StridedView& v, std::vector<float>& storage);

}  // namespace kiln::cpu::onednn
