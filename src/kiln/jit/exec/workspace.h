// The per-call memory of one Executable: the arena holding the plan's
// intermediates and a private copy of every kernel argument, whose data
// pointers are set for the call. A workspace serves one call at a time;
// concurrent calls each take their own from the executable's pool.
#pragma once

#include <span>
#include <vector>

#include "kiln/jit/exec/plan.h"

namespace kiln::jit {

class Workspace {
 public:
  // Allocates the arena and points the arena-rooted arguments into it.
  explicit Workspace(const Plan& plan);
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  // Points the arguments at this call's inputs and outputs. A non-contiguous
  // output gets a contiguous stand-in that finish() copies over.
  // `inputs_strided`: some input's strides differ from the plan's, so the
  // views over inputs are derived again from the real tensors.
  void bind(std::span<const Tensor> inputs, std::span<const Tensor> outputs, bool inputs_strided);
  // The same over raw views (Executable::run_views): the inputs have the
  // plan's strides and the outputs are contiguous.
  void bind_views(std::span<const cpu::StridedView> inputs,
                  std::span<const cpu::StridedView> outputs);
  // Copies stand-ins into their outputs.
  void finish(std::span<const Tensor> outputs);

  const cpu::StridedView* args() const { return args_.data(); }
  // Room for the input keys of the plan's control-flow steps (Plan::key_sources).
  uint64_t* keys() { return keys_.data(); }
  // The version counters of the plan's held tensors this call runs with:
  // read when the call was issued, which in async mode may be before it runs
  // (Note [A compiled run as one engine op]); packed weights are keyed by them.
  void set_held_versions(std::span<const uint64_t> versions) {
    held_versions_.assign(versions.begin(), versions.end());
  }
  void read_held_versions(const std::vector<Tensor>& held) {
    held_versions_.resize(held.size());  // allocates on the first call only
    for (size_t i = 0; i < held.size(); ++i)
      held_versions_[i] = held[i].defined() ? held[i].version() : 0;
  }
  uint64_t held_version(size_t index) const { return held_versions_[index]; }

 private:
  void derive_input_views(std::span<const Tensor> inputs);
  void patch_call_args();

  const Plan& plan_;
  void* arena_ = nullptr;
  std::vector<cpu::StridedView> args_;
  std::vector<uint64_t> keys_;
  std::vector<uint64_t> held_versions_;
  std::vector<char*> bases_;         // 0: the arena; then the inputs; then the outputs
  std::vector<Tensor> stand_ins_;    // per output; defined only during a call that needs one
  bool input_args_derived_ = false;  // args_ over inputs hold another call's strides
};

}  // namespace kiln::jit
