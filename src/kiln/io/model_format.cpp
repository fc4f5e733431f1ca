#include "kiln/io/model_format.h"

#include <xxhash.h>

#include <cstdio>

#include "kiln/autograd/autograd.h"
#include "kiln/ops/copy.h"

namespace kiln::jit::model_format {

uint64_t checksum(const void* data, size_t size) {
  return XXH3_64bits(data, size);
}

uint64_t header_checksum(const Prefix& prefix, std::string_view header) {
  uint64_t seed = XXH3_64bits(&prefix, kChecksummedPrefixBytes);
  return XXH3_64bits_withSeed(header.data(), header.size(), seed);
}

std::string to_hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

std::vector<Tensor> run_example(const CompiledFunction& compiled,
                                const std::vector<Tensor>& inputs) {
  NoGradGuard no_grad;
  if (compiled.state_updates().empty()) return compiled.run(inputs);
  std::shared_ptr<Graph> copy = compiled.graph().clone();
  for (Value* param : copy->params())
    param->set_data(clone(param->data()));
  std::vector<Tensor> own_inputs;
  for (const Tensor& input : inputs)
    own_inputs.push_back(clone(input));
  CompiledFunction on_copy(copy, compiled.num_outputs(), compiled.state_updates());
  return on_copy.run(own_inputs);
}

}  // namespace kiln::jit::model_format
