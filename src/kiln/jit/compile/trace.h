// Tracing: run eager code once while recording the ops it calls, and get a
// CompiledFunction that runs the recorded graph.
//
//   auto f = jit::trace([](const std::vector<Tensor>& in) {
//     return std::vector<Tensor>{kiln::sin(in[0]) + kiln::cos(in[1])};
//   }, {x, y});
//   auto out = f({x2, y2});
//
//   auto traced = jit::trace(*net, x);   // parameters and buffers by state_dict name
//   auto none = jit::trace(fn, {});      // no inputs: every output is a constant
//   auto frozen = jit::trace(*net, x, {}, {.frozen = true});
//
// Only the tensor ops the code calls are recorded: host-side control flow
// takes the path it took while tracing. What the graph cannot reproduce is
// reported (jit/trace/report.h), as a kiln::Error with
// RecordOptions{.strict = true}. The Recorder (jit/trace/recorder.h) is the
// machinery underneath; hybridize.h traces once per input signature.
#pragma once

#include <functional>
#include <vector>

#include "kiln/jit/compile/compiled.h"
#include "kiln/jit/compile/options.h"
#include "kiln/jit/trace/recorder.h"
#include "kiln/nn/module.h"

namespace kiln::jit {

using TracedFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// `record.params` are bound as named graph parameters (weights the function
// closes over); every other tensor it uses besides its inputs is a constant.
CompiledFunction trace(const TracedFn& fn, std::vector<Tensor> example_inputs,
                       RecordOptions record = {}, const CompileOptions& compile = {});

// Traces module.forward(example_input) in the module's current mode
// (call eval() first for inference: dropout and batch_norm record the mode).
// Its parameters and buffers become graph parameters named by their
// state_dict keys, bound to the module's tensors.
CompiledFunction trace(nn::Module& module, const Tensor& example_input, RecordOptions record = {},
                       const CompileOptions& compile = {});

// The same as trace(fn, ...), returning the outputs of the traced (eager)
// run as well.
struct TraceRun {
  CompiledFunction compiled;
  std::vector<Tensor> outputs;
};
TraceRun trace_and_run(const TracedFn& fn, std::vector<Tensor> inputs, RecordOptions record = {},
                       const CompileOptions& compile = {});

}  // namespace kiln::jit
