#include "kiln/jit/compile/trace.h"

namespace kiln::jit {

TraceRun trace_and_run(const TracedFn& fn, std::vector<Tensor> inputs, RecordOptions record,
                       const CompileOptions& compile) {
  nn::NamedTensors params = std::move(record.params);
  Recorder recorder(std::move(record));
  recorder.begin(inputs, params);
  std::vector<Tensor> outputs;
  try {
    outputs = fn(inputs);
  } catch (...) {
    recorder.abort();
    throw;
  }
  return TraceRun{CompiledFunction(recorder.end(outputs), compile), std::move(outputs)};
}

CompiledFunction trace(const TracedFn& fn, std::vector<Tensor> example_inputs, RecordOptions record,
                       const CompileOptions& compile) {
  return trace_and_run(fn, std::move(example_inputs), std::move(record), compile).compiled;
}

CompiledFunction trace(nn::Module& module, const Tensor& example_input, RecordOptions record,
                       const CompileOptions& compile) {
  KILN_CHECK_VALUE(example_input.defined(), "trace: ", module.type_name(),
                   ": the example input is an undefined tensor");
  nn::NamedTensors params = module.state_dict();
  params.insert(params.end(), record.params.begin(), record.params.end());
  record.params = std::move(params);
  auto forward = [&module](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{module.forward(in[0])};
  };
  return trace_and_run(forward, {example_input}, std::move(record), compile).compiled;
}

}  // namespace kiln::jit
