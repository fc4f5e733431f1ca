#include "kiln/jit/compile/cache.h"

#include <algorithm>
#include <utility>

#include "kiln/autograd/autograd.h"
#include "kiln/jit/ir/specialize.h"

namespace kiln::jit {
namespace {

const char* on_off(bool on) {
  return on ? "on" : "off";
}
const char* true_false(bool b) {
  return b ? "true" : "false";
}

void compare_input(size_t i, const InputType& before, const InputType& now,
                   std::vector<GuardChange>& changes) {
  std::string input = str("input ", i);
  if (before.dtype != now.dtype)
    changes.push_back(
        {input + " dtype", kiln::to_string(before.dtype), kiln::to_string(now.dtype)});
  if (before.shape.size() != now.shape.size()) {
    changes.push_back({input + " shape", str(before.shape), str(now.shape)});
    return;
  }
  for (size_t d = 0; d < now.shape.size(); ++d) {
    // A symbolic dim takes any value: its guards say why a call missed.
    if (before.shape[d].is_symbolic() || before.shape[d].same_as(now.shape[d])) continue;
    changes.push_back({str(input, " dim ", d), str(before.shape[d]), str(now.shape[d])});
  }
}

// Whether a call's shape fits an entry's types: static dims equal, any
// value where the entry is symbolic (its guards are checked apart).
bool fits(const IntList& shape, const DimList& dims) {
  if (shape.size() != dims.size()) return false;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d].is_static() && dims[d].static_value() != shape[d]) return false;
  }
  return true;
}

// Same input count, dtypes and ranks, grad mode and train/eval.
bool same_kind(const Signature& a, const Signature& b) {
  if (a.grad_mode != b.grad_mode || a.training != b.training) return false;
  if (a.inputs.size() != b.inputs.size()) return false;
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    if (a.inputs[i].dtype != b.inputs[i].dtype ||
        a.inputs[i].shape.size() != b.inputs[i].shape.size())
      return false;
  }
  return true;
}

std::string entry_text(const Signature& signature, const CompiledFunction& compiled) {
  std::string text = signature.to_string();
  const std::vector<ShapeGuard>& guards = compiled.graph().guards();
  for (size_t i = 0; i < guards.size(); ++i)
    text += str(i ? ", " : "; guards: ", guards[i].to_string());
  return text;
}

}  // namespace

std::string Signature::to_string() const {
  std::string text = "(";
  for (size_t i = 0; i < inputs.size(); ++i)
    text += str(i ? ", " : "", inputs[i].dtype, inputs[i].shape);
  return text + str("); grad mode: ", on_off(grad_mode), "; training: ", true_false(training));
}

bool Signature::matches(std::span<const Tensor> call_inputs, bool call_grad_mode,
                        bool call_training) const {
  if (grad_mode != call_grad_mode || training != call_training) return false;
  if (inputs.size() != call_inputs.size()) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = call_inputs[i];
    if (!t.defined() || t.dtype() != inputs[i].dtype || !fits(t.shape(), inputs[i].shape))
      return false;
  }
  return true;
}

Signature signature_of(std::span<const Tensor> inputs, bool training) {
  Signature signature{{}, grad_mode_enabled(), training};
  signature.inputs.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK_VALUE(inputs[i].defined(), "compiled call: input ", i, " is an undefined tensor");
    signature.inputs.push_back({inputs[i].dtype(), to_dims(inputs[i].shape())});
  }
  return signature;
}

Signature signature_of(const CompiledFunction& compiled, const Signature& call) {
  if (!compiled.symbolic()) return call;
  Signature signature{{}, call.grad_mode, call.training};
  for (const Value* input : compiled.graph().inputs())
    signature.inputs.push_back({input->dtype(), input->shape()});
  return signature;
}

std::vector<GuardChange> changed_guards(const Signature& before, const Signature& now) {
  std::vector<GuardChange> changes;
  if (before.inputs.size() != now.inputs.size())
    changes.push_back({"inputs", str(before.inputs.size()), str(now.inputs.size())});
  for (size_t i = 0; i < std::min(before.inputs.size(), now.inputs.size()); ++i)
    compare_input(i, before.inputs[i], now.inputs[i], changes);
  if (before.grad_mode != now.grad_mode)
    changes.push_back({"grad mode", on_off(before.grad_mode), on_off(now.grad_mode)});
  if (before.training != now.training)
    changes.push_back({"training", true_false(before.training), true_false(now.training)});
  return changes;
}

std::string CacheInfo::to_string() const {
  std::string text = str(entries.size(), " entries, ", hits, " hits, ", misses.size(), " misses");
  for (size_t i = 0; i < entries.size(); ++i)
    text += str("\n  entry ", i, ": ", entries[i]);
  for (size_t i = 0; i < misses.size(); ++i)
    text += str("\n  miss ", i, ": ", misses[i]);
  return text;
}

// ---------------------------------------------------------------- SignatureCache

std::string SignatureCache::miss_reason(const Signature& signature) {
  if (!invalidated_.empty()) return std::exchange(invalidated_, std::string());
  if (!last_used_) return "first call";
  std::string reason;
  for (const GuardChange& change : changed_guards(entries_[*last_used_].first, signature)) {
    reason += (reason.empty() ? "" : "; ") + change.to_string();
    auto counted = std::find_if(change_counts_.begin(), change_counts_.end(),
                                [&](const auto& c) { return c.first == change.guard; });
    if (counted == change_counts_.end()) {
      change_counts_.emplace_back(change.guard, 1);
    } else {
      ++counted->second;
    }
  }
  // The most recent entry matches, an older one did not: can only be a
  // signature cleared away, but say something useful regardless.
  return reason.empty() ? "no entry for this signature" : reason;
}

std::shared_ptr<const CompiledFunction> SignatureCache::lookup(const Signature& signature) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (!(entries_[i].first == signature)) continue;
    ++hits_;
    last_used_ = i;
    return entries_[i].second;
  }
  misses_.push_back(miss_reason(signature));
  return nullptr;
}

std::shared_ptr<const CompiledFunction> SignatureCache::find(const Signature& signature) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [cached, compiled] : entries_) {
    if (cached == signature) return compiled;
  }
  return nullptr;
}

std::optional<size_t> SignatureCache::match(std::span<const Tensor> inputs, bool grad_mode,
                                            bool training, std::string* rejected) const {
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (!entries_[i].first.matches(inputs, grad_mode, training)) continue;
    std::string why = entries_[i].second->size_mismatch(inputs);
    if (why.empty()) return i;
    if (rejected && rejected->empty()) *rejected = str("entry ", i, ": ", why);
  }
  return std::nullopt;
}

std::shared_ptr<const CompiledFunction> SignatureCache::lookup(std::span<const Tensor> inputs,
                                                               bool training) {
  bool grad_mode = grad_mode_enabled();
  std::string rejected;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (std::optional<size_t> i = match(inputs, grad_mode, training, &rejected)) {
      ++hits_;
      last_used_ = *i;
      return entries_[*i].second;
    }
    if (!rejected.empty()) {
      misses_.push_back(std::move(rejected));
      return nullptr;
    }
  }
  return lookup(signature_of(inputs, training));  // records the miss and its reason
}

std::shared_ptr<const CompiledFunction> SignatureCache::find(std::span<const Tensor> inputs,
                                                             bool training) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::optional<size_t> i = match(inputs, grad_mode_enabled(), training, nullptr);
  return i ? entries_[*i].second : nullptr;
}

std::vector<DimPosition> SignatureCache::varying_dims(const Signature& call) const {
  std::vector<DimPosition> varying;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [signature, compiled] : entries_) {
    if (!same_kind(signature, call)) continue;
    for (size_t i = 0; i < call.inputs.size(); ++i) {
      const DimList& dims = signature.inputs[i].shape;
      for (size_t d = 0; d < dims.size(); ++d) {
        DimPosition at{i, d};
        bool varies = dims[d].is_symbolic() || !dims[d].same_as(call.inputs[i].shape[d]);
        if (varies && std::find(varying.begin(), varying.end(), at) == varying.end())
          varying.push_back(at);
      }
    }
  }
  std::sort(varying.begin(), varying.end(), [](const DimPosition& a, const DimPosition& b) {
    return a.input != b.input ? a.input < b.input : a.dim < b.dim;
  });
  return varying;
}

void SignatureCache::drop_covered(const Signature& symbolic, const CompiledFunction& compiled,
                                  size_t& keep) {
  for (size_t i = entries_.size(); i-- > 0;) {
    const Signature& signature = entries_[i].first;
    if (i == keep || entries_[i].second->symbolic() || !same_kind(signature, symbolic)) continue;
    std::vector<IntList> shapes;
    for (const InputType& input : signature.inputs)
      shapes.push_back(to_static(input.shape));
    try {
      bind_symbols(compiled.graph(), shapes);
    } catch (const Error&) {
      continue;  // a size the new entry's guards exclude: keep its own entry
    }
    entries_.erase(entries_.begin() + std::ptrdiff_t(i));
    if (i < keep) --keep;
  }
}

std::string SignatureCache::growth_warning() const {
  std::string text = str(owner_, ": ", entries_.size(), " compiled entries (more than ", kWarnAfter,
                         "), one per input signature");
  auto most = std::max_element(change_counts_.begin(), change_counts_.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
  if (most == change_counts_.end()) return text;
  return text + str("; ", most->first, " changed ", most->second,
                    " times; consider padding or bucketing it to a few sizes (each new value "
                    "traces and compiles again)");
}

std::shared_ptr<const CompiledFunction> SignatureCache::insert(const Signature& signature,
                                                               CompiledFunction compiled) {
  KILN_CHECK_VALUE(compiled.defined(), owner_, ": cannot cache an empty compiled function");
  std::string warning;
  std::shared_ptr<const CompiledFunction> kept;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < entries_.size(); ++i) {
      // Symbolic entries of one signature differ by their guards (each
      // branch on a size its own entry).
      if (!(entries_[i].first == signature) ||
          entries_[i].second->graph().guards() != compiled.graph().guards())
        continue;
      last_used_ = i;
      return entries_[i].second;
    }
    kept = std::make_shared<const CompiledFunction>(std::move(compiled));
    entries_.emplace_back(signature, kept);
    size_t added = entries_.size() - 1;
    if (kept->symbolic()) drop_covered(signature, *kept, added);
    last_used_ = added;
    if (entries_.size() > kWarnAfter && !warned_) {
      warned_ = true;
      warning = growth_warning();
    }
  }
  if (!warning.empty()) warn(make_warning(WarningKind::CacheGrowth, std::move(warning)));
  return kept;
}

std::optional<std::vector<Tensor>> SignatureCache::run(std::span<const Tensor> inputs,
                                                       bool training) {
  std::shared_ptr<const CompiledFunction> compiled = lookup(inputs, training);
  if (!compiled) return std::nullopt;
  return compiled->run_matched(inputs);  // the lookup matched every input's dtype and shape
}

CacheInfo SignatureCache::info() const {
  std::lock_guard<std::mutex> lock(mutex_);
  CacheInfo info;
  for (const auto& [signature, compiled] : entries_)
    info.entries.push_back(entry_text(signature, *compiled));
  info.hits = hits_;
  info.misses = misses_;
  return info;
}

size_t SignatureCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

void SignatureCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();
  last_used_.reset();
  hits_ = 0;
  misses_.clear();
  change_counts_.clear();
  warned_ = false;
  invalidated_.clear();
}

void SignatureCache::invalidate(std::string reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();
  last_used_.reset();
  invalidated_ = std::move(reason);
}

}  // namespace kiln::jit
