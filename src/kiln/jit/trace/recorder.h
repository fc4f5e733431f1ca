// The recorder: while it records on a thread, every op that goes through
// dispatch on that thread becomes a node of a Graph.
//
//   Recorder recorder;
//   recorder.begin({x}, module.state_dict());  // inputs, named params/buffers
//   Tensor y = module.forward(x);              // any code calling ops
//   Capture capture = recorder.end({y});       // the graph, y its output
//
// Tensors are mapped to graph values by TensorImpl identity:
//   - the declared inputs are graph inputs; the named tensors are graph
//     parameters bound to those very tensors (the weights stay live);
//   - a tensor an op produces is that node's output;
//   - any other tensor an op reads is a constant holding a copy of its value
//     at that moment (see Note [Constants are copies] in recorder.cpp);
//   - a wrapped Python number is a constant flagged as one.
// In-place writes are recorded functionally: the result is a new value and
// the written tensor is rebound to it. Inputs and parameters written in place
// get extra graph outputs that a CompiledFunction writes back after each run.
//
// What the graph cannot reproduce is reported (report.h): a recorded value
// read into the host program (item(), printing), writes through aliases or
// into tensors from outside, random factories, and more; each case is a test
// in tests/cpp/jit_divergence_test.cpp.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/core/trace_hook.h"
#include "kiln/jit/ir/graph.h"
#include "kiln/jit/trace/report.h"
#include "kiln/nn/module.h"
#include "kiln/ops/control_flow.h"
#include "kiln/ops/dispatch.h"

namespace kiln::jit {

// A dimension of an input that the recording keeps symbolic: the graph holds
// the size as `symbol`, and code reading it (sym_shape, Python's x.shape)
// gets the symbol, so one graph runs at every size. Inputs naming the same
// symbol must have the same size. `min`/`max` bound it (guards checked on
// every call).
struct DynamicDim {
  size_t input;
  int64_t dim;  // negative counts from the end
  std::string symbol;
  std::optional<int64_t> min = std::nullopt;
  std::optional<int64_t> max = std::nullopt;
};

// How a recording treats what it meets. How the recorded graph is compiled
// afterwards is jit/compile's CompileOptions.
struct RecordOptions {
  // A divergence from eager is a kiln::Error rather than a warning.
  bool strict = false;
  // Keep warnings in the Capture without handing them to the warning
  // handler (kiln's own recordings, such as a graph's backward).
  bool quiet = false;
  // Tensors a traced function uses that should stay live weights (graph
  // parameters by these names) rather than be frozen as constants.
  nn::NamedTensors params = {};
  // Tensors from outside the traced code (not inputs, not named parameters)
  // are bound by reference as parameters named "state.N" instead of copied
  // as constants, and writes into them become state updates: what a whole
  // training step needs (the model's weights, the optimizer's buffers). The
  // parameters' .grad as the code leaves it becomes a grad update.
  bool bind_outside_state = false;
  // Names for the graph inputs (optional; as many as there are inputs).
  std::vector<std::string> input_names = {};
  // Input dims recorded as size symbols (a trace with dynamic shapes). The
  // decisions the code takes on them (broadcasting, `if x.shape[1] > 128`)
  // become the graph's guards.
  std::vector<DynamicDim> dynamic_dims = {};
};

// An extra graph output holding the new value of an input or parameter the
// traced code wrote in place; running the graph copies it into that tensor.
struct StateUpdate {
  size_t output;      // index into Graph::outputs()
  ValueKind target;   // ValueKind::Input or ValueKind::Param
  size_t input = 0;   // which input, when target is Input
  std::string param;  // the parameter's name, when target is Param
};

// A parameter's .grad as the traced code left it: set to a graph output
// after each run (or cleared, when `output` is npos: zero_grad() last).
struct GradUpdate {
  std::string param;
  size_t output = size_t(-1);
};

// What one recording produced.
struct Capture {
  std::shared_ptr<Graph> graph;
  // The traced code's outputs are the graph's first `num_outputs` outputs;
  // the rest are state updates.
  size_t num_outputs = 0;
  std::vector<StateUpdate> state_updates;
  std::vector<GradUpdate> grad_updates;  // with bind_outside_state; after the state updates
  // False for a recorded training step (bind_outside_state): its outputs
  // are results, never differentiated again.
  bool differentiable = true;
  std::vector<TraceWarning> warnings;  // everything reported while recording
  double seconds = 0;                  // from begin() to end()
  // The size symbols' values in the traced call (with dynamic dims).
  std::map<std::string, int64_t> example_sizes;
};

class Recorder final : private DispatchObserver, private TraceHook, private ControlFlowTracer {
 public:
  explicit Recorder(RecordOptions options = {});
  ~Recorder() override;  // stops a recording still running on this thread
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Starts recording on the calling thread (one recording per thread).
  // Undefined parameters (a Linear without bias) are skipped; a tensor given
  // twice keeps its first name.
  void begin(const std::vector<Tensor>& inputs, const nn::NamedTensors& params = {});
  // Stops recording; `outputs` become the graph outputs. Call on the thread
  // that called begin().
  Capture end(const std::vector<Tensor>& outputs);
  // Stops recording and drops the graph (the traced code threw).
  void abort();
  bool recording() const { return graph_ != nullptr; }

 private:
  struct Entry {
    Tensor tensor;         // held so its address is not reused while recording
    Value* value;          // the value the tensor holds now
    uint64_t version;      // its storage's version when `value` was bound
    bool outside = false;  // a tensor from outside the traced code (not an input/param)
  };
  struct Root {  // an input or parameter, to write back if the code wrote it
    Tensor tensor;
    Value* original;
  };

  // DispatchObserver
  void on_op(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs,
             std::span<const Tensor> outputs) override;
  void before_write(const OpDef& op, std::span<const Tensor> inputs, const Tensor& out) override;
  // TraceHook
  void on_host_read(const Tensor& t, const char* what, const std::source_location& where) override;
  void on_random_draw(const char* what, const std::source_location& where) override;
  void on_tensor_created(const Tensor& t) override;
  std::optional<DimList> symbolic_shape(const Tensor& t) override;
  void on_size_specialized(const Dim& size, int64_t value, const char* what,
                           const std::source_location& where) override;

  // ControlFlowTracer (recorder_control_flow.cpp): a node owning blocks,
  // each recorded by running its function once on the operands.
  Tensors cond(const Tensor& pred, const TensorsFn& true_fn, const TensorsFn& false_fn,
               const Tensors& operands, const std::source_location& where) override;
  Tensors while_loop(const PredicateFn& cond_fn, const TensorsFn& body_fn, const Tensors& carried,
                     std::optional<int64_t> max_iterations,
                     const std::source_location& where) override;
  ScanResult scan(const ScanStepFn& fn, const Tensors& init, const Tensors& xs, bool reverse,
                  int64_t length, const std::source_location& where) override;

  // What recording one block gave: its graph, the tensors its function
  // returned (eagerly computed), and the tensors of enclosing graphs it read
  // (its inputs after the operands, in order).
  struct Block {
    std::unique_ptr<Graph> graph;
    Tensors results;
    Tensors captured;
  };
  // The recording state of an enclosing graph while one of its blocks records.
  struct Frame {
    std::shared_ptr<Graph> graph;
    std::unordered_map<const TensorImpl*, Entry> entries;
    std::unordered_multimap<const StorageImpl*, const TensorImpl*> by_storage;
    std::unordered_set<const Value*> dynamic;
    Tensors captured;
  };
  Block record_block(const Tensors& inputs, const std::vector<TensorMeta>& types,
                     const TensorsFn& fn, const std::string& what);
  // Storage made inside control flow (a block's values, a loop's eager
  // run): read from outside, it is an error (internal_, below).
  // `depth`: the number of enclosing frames inside which they were made.
  void note_internal(const std::vector<Storage>& made, size_t depth);
  // Whether an enclosing graph's recording knows `t` (a block then captures it).
  bool known_outside_block(const Tensor& t) const;
  // The value an enclosing graph's recording holds for `t`, innermost first.
  const Value* outside_value(const Tensor& t) const;
  // An input of the block recording now, named after `outer` where it can be.
  Value* add_block_input(TensorMeta type, const Value* outer);
  Value* capture(const Tensor& t);
  // The graph types of `tensors` in the current graph (symbolic dims kept).
  std::vector<TensorMeta> types_of(const Tensors& tensors);
  // Makes every block take the union of the captures, in one order; returns it.
  Tensors unify_captures(std::vector<Block*> blocks, size_t num_operands);
  // Binds the node's outputs to the tensors the eager run produced (copies
  // of those the recording already knows); returns them.
  Tensors bind_results(Node* node, Tensors results);

  // The input types, with the dynamic dims as symbols (their example values
  // become the ShapeEnv's hints, their bounds guards).
  std::vector<TensorMeta> input_types(const std::vector<Tensor>& inputs);
  void install();
  void uninstall();
  void report(WarningKind kind, std::string what,
              const std::source_location& where = std::source_location());

  // The value `t` holds, made a constant when `t` is new to the recording.
  // A use of a tensor whose storage was written through an alias since it
  // was bound is reported (check_stale).
  Value* value_of(const Tensor& t, bool check_stale);
  Entry* find(const Tensor& t);
  Entry* find_same_view(const Tensor& t);
  Value* add_constant(const Tensor& t);
  Entry& bind(const Tensor& t, Value* value, bool outside = false);
  std::string describe(const Value* value) const;

  void record_op(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs,
                 std::span<const Tensor> outputs);
  void record_write(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs,
                    const Tensor& out);
  void check_side_effects(const OpDef& op, const std::vector<int>& written,
                          const std::vector<Value*>& inputs);
  void note_state_writes(const std::vector<int>& written, std::span<const Tensor> inputs);
  void accept_state_writes();
  void mark_dynamic(const OpDef& op, const Node* node);
  bool is_dynamic(const Value* value) const { return dynamic_.count(value) > 0; }
  void add_state_updates(Capture& capture);
  void add_grad_updates(Capture& capture);
  Value* bind_state(const Tensor& t);
  void warn_constant_outputs(const std::vector<Value*>& outputs);
  void drop_unused_constants();

  RecordOptions options_;
  std::shared_ptr<Graph> graph_;
  bool installed_ = false;
  // Decides comparisons of symbolic sizes while recording; its guards
  // become the graph's.
  ShapeEnv shape_env_;
  std::optional<ShapeEnvScope> shape_env_scope_;  // current while installed
  std::chrono::steady_clock::time_point started_;
  std::vector<TraceWarning> warnings_;
  // Lookups only, never iterated: graph order comes from the op order.
  std::unordered_map<const TensorImpl*, Entry> entries_;
  std::unordered_multimap<const StorageImpl*, const TensorImpl*> by_storage_;
  // Storage made while recording (factories, op outputs), held so that
  // writes into tensors the traced code made are told from writes into
  // tensors from outside.
  std::unordered_set<const StorageImpl*> born_;
  std::vector<Storage> born_refs_;
  // Values that change from call to call: inputs, parameters, random ops and
  // everything computed from them. The rest is constant.
  std::unordered_set<const Value*> dynamic_;
  std::vector<Root> roots_;
  // Enclosing graphs while a block records (innermost last); empty at the top.
  std::vector<Frame> frames_;
  // Storage of the values control flow computed inside its blocks and loop
  // runs (held, so an address is never reused while recording): reading
  // one outside would freeze a value of one path (a backward recorded in
  // the same function reads them), so it is refused.
  std::unordered_map<const StorageImpl*, size_t> internal_;  // -> depth made at
  std::vector<Storage> internal_refs_;
  const TensorImpl* pending_write_ = nullptr;
  std::vector<Tensor> state_writes_;  // inputs the last op updated in place
};

}  // namespace kiln::jit
