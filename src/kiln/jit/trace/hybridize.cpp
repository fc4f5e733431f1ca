#include "kiln/jit/trace/hybridize.h"

#include "kiln/ops/dispatch.h"

namespace kiln::jit {
namespace {

bool a_trace_records() {
  return dispatch_observer() != nullptr;
}

}  // namespace

HybridModule::HybridModule(std::shared_ptr<nn::Module> module, TraceOptions options)
    : module_(std::move(module)),
      options_(std::move(options)),
      cache_(module_ ? "hybridize(" + module_->type_name() + ")" : "hybridize") {
  KILN_CHECK_VALUE(module_ != nullptr, "hybridize: no module");
}

HybridModule& HybridModule::train(bool on) {
  module_->train(on);
  return *this;
}

std::shared_ptr<const CompiledFunction> HybridModule::compiled_for(const Tensor& x) const {
  return cache_.find(signature_of({&x, 1}, module_->is_training()));
}

Tensor HybridModule::operator()(const Tensor& x) {
  if (a_trace_records()) return module_->forward(x);
  Signature signature = signature_of({&x, 1}, module_->is_training());
  if (auto compiled = cache_.lookup(signature)) return compiled->run({&x, 1})[0];
  nn::Module& module = *module_;
  auto forward = [&module](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{module.forward(in[0])};
  };
  nn::NamedTensors params = module.state_dict();
  params.insert(params.end(), options_.params.begin(), options_.params.end());
  TraceRun traced = trace_and_run(forward, {x}, params, options_);
  cache_.insert(signature, std::move(traced.compiled));
  return traced.outputs[0];  // what the eager forward computed while recording
}

std::shared_ptr<HybridModule> hybridize(std::shared_ptr<nn::Module> module, TraceOptions options) {
  return std::make_shared<HybridModule>(std::move(module), std::move(options));
}

HybridFunction::HybridFunction(TracedFn fn, TraceOptions options)
    : fn_(std::move(fn)), options_(std::move(options)), cache_("compile") {
  KILN_CHECK_VALUE(fn_ != nullptr, "compile: no function");
}

std::vector<Tensor> HybridFunction::operator()(const std::vector<Tensor>& inputs) {
  if (a_trace_records()) return fn_(inputs);
  Signature signature = signature_of(inputs, /*training=*/false);
  if (auto compiled = cache_.lookup(signature)) return compiled->run(inputs);
  TraceRun traced = trace_and_run(fn_, inputs, options_.params, options_);
  cache_.insert(signature, std::move(traced.compiled));
  return traced.outputs;
}

HybridFunction compile(TracedFn fn, TraceOptions options) {
  return HybridFunction(std::move(fn), std::move(options));
}

}  // namespace kiln::jit
