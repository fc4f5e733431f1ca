#include "kiln/jit/compile/hybridize.h"

#include "kiln/ops/dispatch.h"

namespace kiln::jit {

HybridCache::HybridCache(std::string owner, TracedFn fn, RecordOptions record,
                         CompileOptions compile, ParamsFn params, DynamicShapes dynamic)
    : owner_(std::move(owner)),
      fn_(std::move(fn)),
      record_(std::move(record)),
      compile_(std::move(compile)),
      params_(std::move(params)),
      dynamic_(dynamic),
      cache_(owner_) {
  KILN_CHECK_VALUE(fn_ != nullptr, owner_, ": no function to compile");
}

std::optional<std::vector<Tensor>> HybridCache::run_cached(std::span<const Tensor> inputs,
                                                           bool training) {
  // Inside another trace the code runs eagerly even when an entry exists:
  // an entry writes its state updates back outside dispatch, where the
  // outer recording would not see them (BatchNorm's counter), and its
  // frozen or folded weights would reach the outer graph as constants.
  if (dispatch_observer() != nullptr) return std::nullopt;
  return cache_.run(inputs, training);
}

std::vector<Tensor> HybridCache::record(std::span<const Tensor> inputs, bool training) {
  std::vector<Tensor> args(inputs.begin(), inputs.end());
  // Inside another trace the outer recording takes the ops as they run.
  if (dispatch_observer() != nullptr) return fn_(args);
  Signature signature = signature_of(inputs, training);
  RecordOptions record = record_;
  if (params_) {
    nn::NamedTensors params = params_();
    params.insert(params.end(), record.params.begin(), record.params.end());
    record.params = std::move(params);
  }
  if (record.input_names.size() >= inputs.size()) {
    record.input_names.resize(inputs.size());
  } else {
    record.input_names.clear();
  }
  if (record.dynamic_dims.empty()) record.dynamic_dims = dynamic_dims(signature);
  TraceRun traced = trace_and_run(fn_, std::move(args), std::move(record), compile_);
  Signature served = signature_of(traced.compiled, signature);
  cache_.insert(served, std::move(traced.compiled));
  return std::move(traced.outputs);  // what the eager code computed while recording
}

std::vector<DynamicDim> HybridCache::dynamic_dims(const Signature& call) const {
  std::vector<DimPosition> positions;
  if (dynamic_ == DynamicShapes::Always) {
    for (size_t i = 0; i < call.inputs.size(); ++i)
      for (size_t d = 0; d < call.inputs[i].shape.size(); ++d)
        positions.push_back({i, d});
  } else if (dynamic_ == DynamicShapes::Automatic) {
    positions = cache_.varying_dims(call);
  }
  std::vector<DynamicDim> dims;
  for (const DimPosition& at : positions)
    dims.push_back(DynamicDim{at.input, int64_t(at.dim), str("s", dims.size())});
  return dims;
}

std::vector<Tensor> HybridCache::operator()(std::span<const Tensor> inputs, bool training) {
  if (auto outputs = run_cached(inputs, training)) return std::move(*outputs);
  return record(inputs, training);
}

std::shared_ptr<const CompiledFunction> HybridCache::find(std::span<const Tensor> inputs,
                                                          bool training) const {
  return cache_.find(inputs, training);
}

// ---------------------------------------------------------------- HybridModule

HybridModule::HybridModule(std::shared_ptr<nn::Module> module, RecordOptions record,
                           CompileOptions compile)
    : module_(std::move(module)) {
  KILN_CHECK_VALUE(module_ != nullptr, "hybridize: no module");
  nn::Module* raw = module_.get();
  cache_ = std::make_unique<HybridCache>(
      "hybridize(" + module_->type_name() + ")",
      [raw](const std::vector<Tensor>& in) { return std::vector<Tensor>{raw->forward(in[0])}; },
      std::move(record), std::move(compile), [raw] { return raw->state_dict(); });
}

HybridModule& HybridModule::train(bool on) {
  module_->train(on);
  return *this;
}

Tensor HybridModule::operator()(const Tensor& x) {
  return (*cache_)({&x, 1}, module_->is_training())[0];
}

std::shared_ptr<const CompiledFunction> HybridModule::compiled_for(const Tensor& x) const {
  return cache_->find({&x, 1}, module_->is_training());
}

std::shared_ptr<HybridModule> hybridize(std::shared_ptr<nn::Module> module, RecordOptions record,
                                        CompileOptions compile) {
  return std::make_shared<HybridModule>(std::move(module), std::move(record), std::move(compile));
}

// ---------------------------------------------------------------- HybridFunction

HybridFunction::HybridFunction(TracedFn fn, RecordOptions record, CompileOptions compile)
    : cache_(std::make_unique<HybridCache>("compile", std::move(fn), std::move(record),
                                           std::move(compile))) {}

HybridFunction compile(TracedFn fn, RecordOptions record, CompileOptions compile) {
  return HybridFunction(std::move(fn), std::move(record), std::move(compile));
}

}  // namespace kiln::jit
