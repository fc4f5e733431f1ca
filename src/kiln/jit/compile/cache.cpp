#include "kiln/jit/compile/cache.h"

#include <algorithm>

#include "kiln/autograd/autograd.h"

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
    if (before.shape[d] == now.shape[d]) continue;
    changes.push_back({str(input, " dim ", d), str(before.shape[d]), str(now.shape[d])});
  }
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
    if (!t.defined() || t.dtype() != inputs[i].dtype || t.shape() != inputs[i].shape) return false;
  }
  return true;
}

Signature signature_of(std::span<const Tensor> inputs, bool training) {
  Signature signature{{}, grad_mode_enabled(), training};
  signature.inputs.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK_VALUE(inputs[i].defined(), "compiled call: input ", i, " is an undefined tensor");
    signature.inputs.push_back({inputs[i].dtype(), inputs[i].shape()});
  }
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

std::shared_ptr<const CompiledFunction> SignatureCache::lookup(std::span<const Tensor> inputs,
                                                               bool training) {
  bool grad_mode = grad_mode_enabled();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (!entries_[i].first.matches(inputs, grad_mode, training)) continue;
      ++hits_;
      last_used_ = i;
      return entries_[i].second;
    }
  }
  return lookup(signature_of(inputs, training));  // records the miss and its reason
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
      if (!(entries_[i].first == signature)) continue;
      last_used_ = i;
      return entries_[i].second;
    }
    kept = std::make_shared<const CompiledFunction>(std::move(compiled));
    entries_.emplace_back(signature, kept);
    last_used_ = entries_.size() - 1;
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
    info.entries.push_back(signature.to_string());
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
}

}  // namespace kiln::jit
