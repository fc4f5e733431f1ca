#include "kiln/jit/compile/per_size_runner.h"

#include "kiln/jit/ir/specialize.h"
#include "kiln/util/error.h"

namespace kiln::jit {

PerSizeRunner::PerSizeRunner(std::shared_ptr<const Graph> graph, Factory factory, size_t max_sizes)
    : graph_(std::move(graph)), factory_(std::move(factory)), max_sizes_(max_sizes) {
  KILN_CHECK(max_sizes_ > 0, "PerSizeRunner: max_sizes must be positive");
}

PerSizeRunner::Found PerSizeRunner::entry_for(std::span<const Tensor> inputs) const {
  std::vector<int64_t> key;
  for (const Tensor& t : inputs) {
    key.push_back(t.dim());
    key.insert(key.end(), t.shape().begin(), t.shape().end());
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = entries_.size(); i-- > 0;) {
      if (entries_[i]->key == key) return {entries_[i]->graph, entries_[i]->runner};
    }
  }
  // A new size: bind and check the symbols, specialize and plan (outside
  // the lock; two threads meeting the same new size both plan, one is kept).
  std::vector<IntList> shapes;
  for (const Tensor& t : inputs)
    shapes.push_back(t.shape());
  SymbolBindings bindings = bind_symbols(*graph_, shapes);
  auto entry = std::make_unique<Entry>();
  entry->key = std::move(key);
  entry->graph = specialize(*graph_, bindings);
  entry->runner = factory_(entry->graph);
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& e : entries_) {
    if (e->key == entry->key) return {e->graph, e->runner};
  }
  if (entries_.size() == max_sizes_) entries_.erase(entries_.begin());
  Found found{entry->graph, entry->runner};
  entries_.push_back(std::move(entry));
  return found;
}

std::vector<Tensor> PerSizeRunner::run_unchecked(std::span<const Tensor> inputs) const {
  return entry_for(inputs).runner->run_unchecked(inputs);
}

std::shared_ptr<const Graph> PerSizeRunner::specialized(std::span<const Tensor> inputs) const {
  return entry_for(inputs).graph;
}

size_t PerSizeRunner::num_sizes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

}  // namespace kiln::jit
