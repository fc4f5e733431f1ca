// The flat plan a graph is lowered to: a list of steps, each a kernel (or
// prepared kernel) with its argument views already built, over memory
// described as slots. Running the plan is a loop over the steps; everything
// that does not depend on the data (shapes, strides, view offsets, which
// kernel, oneDNN primitives, arena offsets) was decided by lower().
//
// A slot is where one value lives: a root plus a byte offset. The roots are
//   Fixed   a parameter's or constant's storage (a pointer known now),
//   Arena   one planned buffer of the per-call workspace,
//   Input   graph input i: the caller's tensor, known per call,
//   Output  graph output i: the caller's result tensor, known per call.
// View ops become slots over their input's root (no step runs for them).
// Per call only the arguments rooted at inputs and outputs get their data
// pointer patched; arena arguments are patched once per workspace.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/jit/exec/memory_plan.h"
#include "kiln/jit/ir/graph.h"

namespace kiln::jit {

class ControlFlowKernel;

enum class RootKind : uint8_t { Fixed, Arena, Input, Output };

struct Slot {
  RootKind root = RootKind::Arena;
  uint32_t root_index = 0;  // the held tensor, arena buffer, input or output
  int64_t byte_offset = 0;  // from the root's start (a storage's start for Fixed)
  // Shape, strides and dtype as the kernels see them; data only for Fixed.
  cpu::StridedView view;
  size_t value_id = 0;  // the graph value, for printing
  // A view op's output: how to re-derive it from `view_base` when a graph
  // input arrives with other strides than the plan assumed.
  int32_t view_base = -1;
  const OpDef* view_op = nullptr;
  const Attrs* view_attrs = nullptr;
  size_t view_output = 0;
};

struct Step {
  const OpDef* op = nullptr;
  KernelFn kernel = nullptr;
  const PreparedKernel* prepared = nullptr;  // run instead of `kernel` when set
  const Attrs* attrs = nullptr;
  uint32_t first_arg = 0;  // inputs then outputs, in Plan::args
  uint32_t num_inputs = 0, num_outputs = 0;
  // Reads or writes a slot rooted at a graph input: when an input comes
  // with other strides, the plain kernel runs (prepared state assumed them).
  bool touches_inputs = false;
  // The held tensor whose packed copy the prepared kernel keeps (see
  // PreparedKernel::packable_input), or -1: run_packed() is called with its
  // version.
  int32_t packed_held = -1;
  // The graph input whose packed copy the prepared kernel keeps while the
  // caller keys that input (Executable::run_views: a scan's captures), or -1.
  int32_t packed_input = -1;
  // Too small for a second thread to pay: runs under cpu::OneThread (Note
  // [Threads per step], ops/op_threads.h).
  bool one_thread = false;
  // A control-flow step: its kernel, which takes its inputs' keys, found
  // through Plan::key_sources from first_key_source on (one per input).
  const ControlFlowKernel* control_flow = nullptr;
  uint32_t first_key_source = 0;
};

// Sets args[arg].data = bases[base] + byte_offset.
struct Patch {
  uint32_t arg;
  uint32_t base;  // 0: the arena; 1 + i: input i; 1 + num_inputs + j: output j
  int64_t byte_offset;
};

// After a call, the version counter of what a step wrote in place
// (batch_norm's running statistics in training) is bumped, as eager does.
struct Mutation {
  RootKind root;  // Fixed (a held tensor) or Input
  uint32_t index;
};

// Where the key of a control-flow step's input comes from per call (see
// Executable::run_views): the version of held tensor `index` (Fixed), the
// caller's key for graph input `index` (Input), or nowhere (Arena: an
// intermediate, whose contents differ per call).
struct KeySource {
  RootKind root = RootKind::Arena;
  uint32_t index = 0;
};

// A graph output written into a parameter's own memory instead of a fresh
// tensor: a training step's new weights and optimizer buffers. The kernel
// that computes it writes there directly when nothing reads the parameter's
// old value afterwards; else a copy at the end of the plan does.
struct OutputIntoParam {
  size_t output;
  const Value* param;
};

// Steps that may run side by side: Note [Concurrent steps], concurrency.h.
struct Wave {
  uint32_t first = 0, count = 0;  // in Plan::steps
  bool concurrent = false;        // the cost model says run it side by side
};

struct Plan {
  size_t num_inputs = 0, num_outputs = 0;
  // Per graph output: the held tensor it is written into, or -1.
  std::vector<int32_t> output_held;
  std::vector<Slot> slots;
  std::vector<int32_t> input_slots;  // the slot of each graph input
  std::vector<Step> steps;
  std::vector<int32_t> arg_slots;      // each argument's slot; -1 for an absent input
  std::vector<cpu::StridedView> args;  // every step's arguments, template
  std::vector<Patch> arena_patches, call_patches;
  std::vector<uint32_t> input_rooted_args;  // args over a graph input (re-derived, restored)
  std::vector<Mutation> mutations;
  std::vector<KeySource> key_sources;  // control-flow steps' inputs, from Step::first_key_source
  std::vector<BufferRequest> buffers;  // what the arena holds, by root_index
  MemoryPlan memory;
  // Parameters and constants, referenced (an optimizer's in-place update is
  // seen by the next call).
  std::vector<Tensor> held;
  std::deque<Attrs> attrs;  // a deque: steps point into it
  std::vector<std::unique_ptr<PreparedKernel>> prepared;
  // The steps by wave, in order (empty: none could run side by side).
  std::vector<Wave> waves;
  bool has_concurrent_waves = false;

  // One line per slot and step: where each value lives, what runs.
  std::string to_string() const;
};

// The tensor a view slot is over `base` (its view_base slot's tensor): the
// view op's rule applied at run time, for inputs that come with strides the
// plan did not assume.
Tensor derive_view(const Slot& slot, const Tensor& base);

// Places the plan's arena buffers (Plan::buffers, with the slots and steps
// that use them): plan_memory() unless a caller knows better (a graph
// specialized from a symbolic one takes its offsets from one plan for every
// size, jit/compile/symbolic_memory.h).
using BufferPlacer = std::function<MemoryPlan(const Plan& plan)>;

// Checks the graph can run (nodes in order, types as the op table infers
// them, parameters bound, kernels present) and lowers it. Errors name the
// node, op and values. An entry of `into` whose parameter is not dense (or
// is named twice) is ignored: that output stays a fresh tensor.
Plan lower(const Graph& graph, std::span<const OutputIntoParam> into = {},
           const BufferPlacer& place = {});

}  // namespace kiln::jit
