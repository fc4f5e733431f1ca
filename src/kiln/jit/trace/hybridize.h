// hybridize in C++: a module (or a function) that compiles itself on the
// first call with each new input signature and runs the compiled graph on
// later calls with that signature.
//
//   auto net = jit::hybridize(std::make_shared<MLP>());
//   Tensor y = (*net)(x);        // traces MLP::forward once, returns its result
//   Tensor y2 = (*net)(x);       // runs the graph: forward's body does not run
//   std::cout << net->cache_info().to_string();
//
// With grad mode on and a parameter that requires grad, the compiled call
// replays through dispatch, so loss.backward() fills the same .grad as eager.
// Called while another trace records, it runs forward eagerly (the outer
// trace records its ops).
#pragma once

#include <memory>
#include <vector>

#include "kiln/jit/trace/cache.h"
#include "kiln/jit/trace/trace.h"
#include "kiln/nn/module.h"

namespace kiln::jit {

class HybridModule {
 public:
  explicit HybridModule(std::shared_ptr<nn::Module> module, TraceOptions options = {});

  Tensor operator()(const Tensor& x);
  Tensor forward(const Tensor& x) { return (*this)(x); }

  CacheInfo cache_info() const { return cache_.info(); }
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
  TraceOptions options_;
  SignatureCache cache_;
};

std::shared_ptr<HybridModule> hybridize(std::shared_ptr<nn::Module> module,
                                        TraceOptions options = {});

// A function compiled per input signature (the C++ side of @kiln.compile).
class HybridFunction {
 public:
  explicit HybridFunction(TracedFn fn, TraceOptions options = {});
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);
  CacheInfo cache_info() const { return cache_.info(); }

 private:
  TracedFn fn_;
  TraceOptions options_;
  SignatureCache cache_;
};

HybridFunction compile(TracedFn fn, TraceOptions options = {});

}  // namespace kiln::jit
