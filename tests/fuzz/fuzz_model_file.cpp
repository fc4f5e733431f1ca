// libFuzzer target: any bytes as a .kiln model file. Reading must either
// give a checked model or raise kiln::Error; a crash, a sanitizer report,
// a leak or an allocation beyond libFuzzer's limit is a bug. Models that
// read cleanly are also compiled (lowered and memory-planned) when their
// values are small, which puts the graph that came from the file through
// the executor's planning too. A model with symbolic sizes is first
// specialized to its stored example's sizes (binding the symbols, checking
// the guards, inferring every node again), as a call at those sizes would.
//
// Random mutations would nearly always break the header checksum and stop
// at the first check; the custom mutator re-seals the header after each
// mutation, so the fuzzer explores the JSON, the records and the graph text
// behind it. (Tensor checksums are left broken: the bytes they cover are
// only weights, never parsed.)
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kiln/io/model_file.h"
#include "kiln/io/model_format.h"
#include "kiln/jit/ir/specialize.h"

namespace {

// The input goes into an in-memory file that the loader opens by path,
// as it opens any model: no disk traffic per run.
int memory_file() {
  static int fd = [] {
    int created = memfd_create("kiln-fuzz-model", 0);
    if (created < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    return created;
  }();
  return fd;
}

// The static graph a call would plan: the graph itself, or a symbolic one
// at its example's sizes (null without an example).
std::shared_ptr<const kiln::jit::Graph> graph_to_plan(const kiln::jit::ModelFile& model) {
  if (!model.graph->is_symbolic()) return model.graph;
  if (model.example_inputs.empty()) return nullptr;
  std::vector<kiln::IntList> shapes;
  for (const kiln::Tensor& input : model.example_inputs)
    shapes.push_back(input.shape());
  return kiln::jit::specialize(*model.graph, kiln::jit::bind_symbols(*model.graph, shapes));
}

bool small_enough_to_compile(const kiln::jit::Graph& graph) {
  int64_t total = 0;
  for (const kiln::jit::Node* node : graph.nodes()) {
    for (const kiln::jit::Value* output : node->outputs()) {
      int64_t numel = 1;
      for (const kiln::Dim& dim : output->shape()) {
        if (dim.is_symbolic()) return false;  // sized only when run
        numel *= dim.static_value();
      }
      total += numel;
      if (total > (int64_t(1) << 20)) return false;
    }
  }
  return graph.num_nodes() <= 64;
}

}  // namespace

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  using namespace kiln::jit::model_format;
  size = LLVMFuzzerMutate(data, size, max_size);
  if (size < kPrefixBytes || seed % 8 == 0) return size;  // sometimes leave it broken
  Prefix prefix;
  std::memcpy(&prefix, data, sizeof prefix);
  if (prefix.header_bytes > size - kPrefixBytes) return size;
  std::string_view header(reinterpret_cast<const char*>(data) + kPrefixBytes, prefix.header_bytes);
  prefix.header_checksum = header_checksum(prefix, header);
  std::memcpy(data, &prefix, sizeof prefix);
  return size;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fd = memory_file();
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != ssize_t(size)) std::abort();
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  try {
    kiln::jit::ModelFile model = kiln::jit::read_model_file(path);
    std::shared_ptr<const kiln::jit::Graph> graph = graph_to_plan(model);
    if (graph && small_enough_to_compile(*graph))
      kiln::jit::CompiledFunction(graph, model.num_outputs, model.state_updates);
  } catch (const kiln::Error&) {
    // A refused file: what should happen to nearly every input.
  }
  return 0;
}
