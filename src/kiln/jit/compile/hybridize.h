// hybridize: code compiled on its first call with each new input signature,
// whose later calls with that signature run the compiled graph.
//
//   auto net = jit::hybridize(std::make_shared<MLP>());
//   Tensor y = (*net)(x);        // traces MLP::forward once, returns its result
//   Tensor y2 = (*net)(x);       // runs the graph: forward's body does not run
//   std::cout << net->cache_info().to_string();
//
// HybridCache is the one implementation, for C++ (HybridModule,
// HybridFunction) and Python (Module.hybridize(), @kiln.compile) alike: a
// hit looks the signature up once and runs the entry; a miss records the
// code once (Recorder), compiles it, keeps it and returns what the code
// returned. With grad mode on and a parameter that requires grad, a compiled
// call feeds autograd, so loss.backward() fills the same .grad as eager.
// Called while another trace records, the code runs eagerly, entry or not:
// the outer trace records its ops, its state writes included.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kiln/jit/compile/cache.h"
#include "kiln/jit/compile/trace.h"
#include "kiln/nn/module.h"

namespace kiln::jit {

// Which input dims a recording keeps symbolic (hybridize(dynamic=...)).
enum class DynamicShapes {
  // A dim that takes a second value is made symbolic and the entry traced
  // again once: a model called with many batch sizes holds one entry.
  Automatic,
  Always,  // every input dim is symbolic from the first call
  Never,   // one entry per distinct shape
};

class HybridCache {
 public:
  // The named tensors to bind as graph parameters, read at each recording
  // (a module's state_dict: it may have changed since the last one).
  using ParamsFn = std::function<nn::NamedTensors()>;

  // `owner` names the cache in its messages ("hybridize(MLP)").
  // `record.input_names` may name more inputs than a call has: a recording
  // uses the first ones (a Python function's positional parameters).
  // `record.dynamic_dims`, when given, are used on every recording instead
  // of what `dynamic` picks.
  HybridCache(std::string owner, TracedFn fn, RecordOptions record = {},
              CompileOptions compile = {}, ParamsFn params = {},
              DynamicShapes dynamic = DynamicShapes::Automatic);

  // The outputs for these inputs: the entry's, or after recording, what the
  // code returned while it recorded. `training` is part of the signature.
  std::vector<Tensor> operator()(std::span<const Tensor> inputs, bool training);
  // The hit alone: the entry's outputs, or nullopt on a miss (counted, with
  // the guard that failed) or while another trace records. The one call a
  // hit costs from Python.
  std::optional<std::vector<Tensor>> run_cached(std::span<const Tensor> inputs, bool training);
  // The miss alone: records the code on these inputs and keeps the entry.
  std::vector<Tensor> record(std::span<const Tensor> inputs, bool training);

  // The entry a call with these inputs would run, or null.
  std::shared_ptr<const CompiledFunction> find(std::span<const Tensor> inputs, bool training) const;
  CacheInfo info() const { return cache_.info(); }
  size_t size() const { return cache_.size(); }
  void clear() { cache_.clear(); }
  // Drops every entry; the next call records again and its miss says why.
  void invalidate(std::string reason) { cache_.invalidate(std::move(reason)); }
  const std::string& owner() const { return owner_; }

 private:
  // The dims a recording for `call` keeps symbolic.
  std::vector<DynamicDim> dynamic_dims(const Signature& call) const;

  std::string owner_;
  TracedFn fn_;
  RecordOptions record_;
  CompileOptions compile_;
  ParamsFn params_;
  DynamicShapes dynamic_;
  SignatureCache cache_;
};

class HybridModule {
 public:
  explicit HybridModule(std::shared_ptr<nn::Module> module, RecordOptions record = {},
                        CompileOptions compile = {});

  Tensor operator()(const Tensor& x);
  Tensor forward(const Tensor& x) { return (*this)(x); }

  CacheInfo cache_info() const { return cache_->info(); }
  // The entry a call with `x` in the module's current mode would run, or
  // null (for looking at the graph: hybrid.compiled_for(x)->graph()).
  std::shared_ptr<const CompiledFunction> compiled_for(const Tensor& x) const;

  nn::Module& module() const { return *module_; }
  const std::shared_ptr<nn::Module>& module_ptr() const { return module_; }
  // The module's own, so optimizers and train()/eval() work as on the module.
  std::vector<Tensor> parameters() const { return module_->parameters(); }
  HybridModule& train(bool on = true);
  HybridModule& eval() { return train(false); }

 private:
  std::shared_ptr<nn::Module> module_;
  std::unique_ptr<HybridCache> cache_;
};

std::shared_ptr<HybridModule> hybridize(std::shared_ptr<nn::Module> module,
                                        RecordOptions record = {}, CompileOptions compile = {});

// A function compiled per input signature (the C++ side of @kiln.compile).
class HybridFunction {
 public:
  explicit HybridFunction(TracedFn fn, RecordOptions record = {}, CompileOptions compile = {});
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) {
    return (*cache_)(inputs, /*training=*/false);
  }
  CacheInfo cache_info() const { return cache_->info(); }

 private:
  std::unique_ptr<HybridCache> cache_;
};

HybridFunction compile(TracedFn fn, RecordOptions record = {}, CompileOptions compile = {});

}  // namespace kiln::jit
