#include "kiln/jit/trace/trace.h"

namespace kiln::jit {

TraceRun trace_and_run(const TracedFn& fn, std::vector<Tensor> inputs,
                       const nn::NamedTensors& params, TraceOptions opts) {
  Recorder recorder(std::move(opts));
  recorder.begin(inputs, params);
  std::vector<Tensor> outputs;
  try {
    outputs = fn(inputs);
  } catch (...) {
    recorder.abort();
    throw;
  }
  return TraceRun{CompiledFunction(recorder.end(outputs), opts.passes), std::move(outputs)};
}

CompiledFunction trace(const TracedFn& fn, std::vector<Tensor> example_inputs, TraceOptions opts) {
  nn::NamedTensors params = opts.params;
  return trace_and_run(fn, std::move(example_inputs), params, std::move(opts)).compiled;
}

CompiledFunction trace(nn::Module& module, const Tensor& example_input, TraceOptions opts) {
  KILN_CHECK_VALUE(example_input.defined(), "trace: ", module.type_name(),
                   ": the example input is an undefined tensor");
  nn::NamedTensors params = module.state_dict();
  params.insert(params.end(), opts.params.begin(), opts.params.end());
  auto forward = [&module](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{module.forward(in[0])};
  };
  return trace_and_run(forward, {example_input}, params, std::move(opts)).compiled;
}

}  // namespace kiln::jit
