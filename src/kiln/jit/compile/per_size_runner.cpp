#include "kiln/jit/compile/per_size_runner.h"

#include "kiln/jit/ir/size_symbols.h"
#include "kiln/jit/ir/specialize.h"
#include "kiln/util/error.h"

namespace kiln::jit {

PerSizeRunner::PerSizeRunner(std::shared_ptr<const Graph> graph, Factory factory, size_t max_sizes)
    : graph_(std::move(graph)),
      factory_(std::move(factory)),
      placer_(std::make_shared<SymbolicPlacer>(graph_)),
      max_sizes_(max_sizes) {
  KILN_CHECK(max_sizes_ > 0, "PerSizeRunner: max_sizes must be positive");
  if (binds_size_symbols(*graph_)) unspecialized_ = factory_(graph_, {});
}

void PerSizeRunner::append_key(std::vector<int64_t>& key, const IntList& shape) {
  key.push_back(int64_t(shape.size()));
  key.insert(key.end(), shape.begin(), shape.end());
}

PerSizeRunner::Found PerSizeRunner::entry_for(std::span<const Tensor> inputs) const {
  if (unspecialized_) {
    std::vector<IntList> shapes;
    for (const Tensor& t : inputs)
      shapes.push_back(t.shape());
    bind_symbols(*graph_, shapes);  // checks the shapes and the guards on them
    return {graph_, unspecialized_};
  }
  std::vector<int64_t> key;
  for (const Tensor& t : inputs)
    append_key(key, t.shape());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = entries_.size(); i-- > 0;) {
      if (entries_[i]->key == key) return {entries_[i]->graph, entries_[i]->runner};
    }
  }
  std::vector<IntList> shapes;
  for (const Tensor& t : inputs)
    shapes.push_back(t.shape());
  return make_entry(std::move(key), shapes);
}

PerSizeRunner::Found PerSizeRunner::make_entry(std::vector<int64_t> key,
                                               std::span<const IntList> shapes) const {
  // A new size: bind and check the symbols, specialize and plan (outside
  // the lock; two threads meeting the same new size both plan, one is kept).
  SymbolBindings bindings = bind_symbols(*graph_, shapes);
  auto entry = std::make_unique<Entry>();
  entry->key = std::move(key);
  entry->graph = specialize(*graph_, bindings);
  const Graph& specialized = *entry->graph;
  entry->runner = factory_(
      entry->graph, [&](const Plan& plan) { return placer_->place(specialized, plan, bindings); });
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& e : entries_) {
    if (e->key == entry->key) return {e->graph, e->runner};
  }
  if (entries_.size() == max_sizes_) entries_.erase(entries_.begin());
  Found found{entry->graph, entry->runner};
  entries_.push_back(std::move(entry));
  return found;
}

RunnerStats PerSizeRunner::prepare(std::span<const IntList> input_shapes) const {
  if (unspecialized_) return unspecialized_->stats();
  std::vector<int64_t> key;
  for (const IntList& shape : input_shapes)
    append_key(key, shape);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& e : entries_) {
      if (e->key == key) return e->runner->stats();
    }
  }
  return make_entry(std::move(key), input_shapes).runner->stats();
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

RunnerStats PerSizeRunner::stats() const {
  if (unspecialized_) return unspecialized_->stats();
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.empty() ? RunnerStats{} : entries_.front()->runner->stats();
}

}  // namespace kiln::jit
