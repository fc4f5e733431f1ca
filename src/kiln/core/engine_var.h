// EngineVar: what the dependency engine (kiln/engine) tracks per piece of
// state its ops read and write: a storage and the views over it, or a
// random generator. Core only holds the slot and asks the variable to wait;
// the engine layer defines the variable. See Note [Sync points] in
// kiln/engine/engine.h.
#pragma once

#include <atomic>

namespace kiln {

class EngineVar {
 public:
  // Host access from outside a running engine op (reading values into the
  // program, writing them from it): waits for the ops pushed on this
  // variable, then raises the failure one of them left, if any.
  virtual void wait_for_host_access() = 0;

  // Storages and pending ops share a variable: it lives until both let go.
  void retain() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

 protected:
  virtual ~EngineVar() = default;

 private:
  std::atomic<int> refs_{1};
};

// The variable of one piece of state, made by the engine the first time an
// op is pushed on it (so sync mode never makes one).
class EngineVarSlot {
 public:
  EngineVarSlot() = default;
  EngineVarSlot(const EngineVarSlot&) = delete;
  EngineVarSlot& operator=(const EngineVarSlot&) = delete;
  ~EngineVarSlot() {
    if (EngineVar* var = get()) var->release();
  }

  EngineVar* get() const { return var_.load(std::memory_order_acquire); }
  // Installs `var` (taking its reference) unless another thread was first;
  // returns the installed variable either way.
  EngineVar* install(EngineVar* var) {
    EngineVar* expected = nullptr;
    if (var_.compare_exchange_strong(expected, var, std::memory_order_acq_rel)) return var;
    var->release();
    return expected;
  }
  void wait_for_host_access() const {
    if (EngineVar* var = get()) [[unlikely]]
      var->wait_for_host_access();
  }

 private:
  std::atomic<EngineVar*> var_{nullptr};
};

}  // namespace kiln
