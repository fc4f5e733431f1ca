// The signature cache behind hybridize: one CompiledFunction per input
// signature (each input's dtype and shape, grad mode, train/eval). A miss
// keeps the reason, the guards that failed against the most recently used
// entry ("input 0 dim 0: 64 -> 32"), and past kWarnAfter entries the cache
// warns once, naming the guard that keeps changing.
//
// An entry traced with dynamic shapes has symbolic dims in its signature
// (float32[s0, 512]): it serves every size its graph's types and guards
// admit, and a call they do not admit is a miss whose reason is the guard
// that failed. Such an entry replaces the static entries it covers.
//
// One call does lookup and run, checking the inputs once. HybridCache
// (hybridize.h) adds the miss path: recording and compiling the entry.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kiln/jit/compile/compiled.h"

namespace kiln::jit {

struct InputType {
  DType dtype;
  DimList shape;  // symbolic dims: any size the entry's guards admit
  bool operator==(const InputType& other) const {
    return dtype == other.dtype && same_dims(shape, other.shape);
  }
};

struct Signature {
  std::vector<InputType> inputs;
  bool grad_mode = true;
  bool training = false;
  bool operator==(const Signature&) const = default;
  // Whether a call with these inputs has this signature (builds nothing:
  // this is the check on every hit).
  bool matches(std::span<const Tensor> call_inputs, bool call_grad_mode, bool call_training) const;
  // "(float32[64, 512]); grad mode: on; training: true"
  std::string to_string() const;
};

// The signature of a call with these inputs, in this thread's grad mode.
Signature signature_of(std::span<const Tensor> inputs, bool training);
// The signature an entry compiled for `call` serves: the graph's input types.
Signature signature_of(const CompiledFunction& compiled, const Signature& call);

// An input dim, for automatic dynamic shapes.
struct DimPosition {
  size_t input;
  size_t dim;
  bool operator==(const DimPosition&) const = default;
};

// The guards of `now` that differ from `before`, each "guard: old -> new":
// "input 0 dim 0: 64 -> 32", "input 1 dtype: float32 -> float64",
// "input 0 shape: [2, 3] -> [2, 3, 4]", "inputs: 1 -> 2",
// "grad mode: off -> on", "training: true -> false".
struct GuardChange {
  std::string guard;  // "input 0 dim 0"
  std::string before, after;
  std::string to_string() const { return guard + ": " + before + " -> " + after; }
};
std::vector<GuardChange> changed_guards(const Signature& before, const Signature& now);

struct CacheInfo {
  // Each entry's signature, in the order compiled; a symbolic entry's
  // guards follow ("guards: s0 != 1, s1 <= 128").
  std::vector<std::string> entries;
  size_t hits = 0;
  std::vector<std::string> misses;  // "first call", or the failed guards joined by "; "
  std::string to_string() const;
};

class SignatureCache {
 public:
  static constexpr size_t kWarnAfter = 8;

  // `owner` names the cache in its warning ("hybridize(MLP)").
  explicit SignatureCache(std::string owner = "hybridize") : owner_(std::move(owner)) {}

  // The entry for this signature, or null after recording the miss.
  std::shared_ptr<const CompiledFunction> lookup(const Signature& signature);
  std::shared_ptr<const CompiledFunction> lookup(std::span<const Tensor> inputs, bool training);
  // The entry for this signature or null, counting neither a hit nor a miss.
  std::shared_ptr<const CompiledFunction> find(const Signature& signature) const;
  // The entry a call with these inputs would run, or null (counts nothing).
  std::shared_ptr<const CompiledFunction> find(std::span<const Tensor> inputs, bool training) const;
  // The dims of `call` that take another value in an entry of the same
  // kind (input dtypes and ranks, grad mode, train/eval), or are symbolic
  // in one: what automatic dynamic shapes make symbolic.
  std::vector<DimPosition> varying_dims(const Signature& call) const;
  // Adds the entry for `signature` (keeping an existing one: two threads may
  // trace the same signature at once) and returns the entry kept.
  std::shared_ptr<const CompiledFunction> insert(const Signature& signature,
                                                 CompiledFunction compiled);
  // Lookup and run in one call: the entry's outputs, or nullopt on a miss.
  std::optional<std::vector<Tensor>> run(std::span<const Tensor> inputs, bool training);

  CacheInfo info() const;
  size_t size() const;
  void clear();
  // Drops every entry, keeping the counts: a value the entries were recorded
  // with changed (a number a Python module attribute holds). The next miss
  // gives `reason` ("self.scale changed from 0.5 to 2.0").
  void invalidate(std::string reason);

 private:
  std::string miss_reason(const Signature& signature);
  std::string growth_warning() const;
  // The entry these inputs run (its index), or nullopt; `rejected` gets why
  // a symbolic entry of their signature did not admit their sizes.
  std::optional<size_t> match(std::span<const Tensor> inputs, bool grad_mode, bool training,
                              std::string* rejected) const;
  // Drops the static entries `symbolic` serves (it was traced because they
  // varied); before `keep`, which moves down by the entries dropped.
  void drop_covered(const Signature& symbolic, const CompiledFunction& compiled, size_t& keep);

  std::string owner_;
  mutable std::mutex mutex_;
  // A handful of entries: a linear search in compile order.
  std::vector<std::pair<Signature, std::shared_ptr<const CompiledFunction>>> entries_;
  std::optional<size_t> last_used_;
  size_t hits_ = 0;
  std::vector<std::string> misses_;
  // How many misses each guard failed in, in the order first seen.
  std::vector<std::pair<std::string, size_t>> change_counts_;
  bool warned_ = false;
  std::string invalidated_;  // the reason invalidate() gave, until a miss reports it
};

}  // namespace kiln::jit
