#include "kiln/nn/module.h"

#include <algorithm>
#include <sstream>

#include "kiln/autograd/autograd.h"
#include "kiln/ops/copy.h"

namespace kiln::nn {

namespace {

const Tensor* find_entry(const NamedTensors& list, const std::string& name) {
  for (const auto& [key, value] : list) {
    if (key == name) return &value;
  }
  return nullptr;
}

// "a", "b", "c" -> "\"a\", \"b\", \"c\"" for error messages.
std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names)
    out += (out.empty() ? "\"" : ", \"") + name + "\"";
  return out;
}

}  // namespace

Module::Module(std::string type_name) : type_name_(std::move(type_name)) {}

Tensor Module::forward(const Tensor&) {
  throw Error(ErrorKind::NotImplemented,
              str(type_name_, ": this module has no single-input forward"));
}

void Module::check_new_name(const std::string& name, const char* what) const {
  KILN_CHECK_VALUE(!name.empty(), type_name_, ": ", what, " name can't be empty");
  KILN_CHECK_VALUE(name.find('.') == std::string::npos, type_name_, ": ", what, " name \"", name,
                   "\" can't contain \".\"");
  bool taken = find_entry(parameters_, name) || find_entry(buffers_, name) ||
               std::any_of(children_.begin(), children_.end(),
                           [&](const auto& child) { return child.first == name; });
  KILN_CHECK_VALUE(!taken, type_name_, ": attribute \"", name, "\" already exists");
}

Tensor Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_new_name(name, "parameter");
  if (t.defined() && requires_grad) requires_grad_(t);
  parameters_.emplace_back(name, t);
  return t;
}

Tensor Module::register_buffer(const std::string& name, Tensor t) {
  check_new_name(name, "buffer");
  buffers_.emplace_back(name, t);
  return t;
}

void Module::add_child(const std::string& name, ModulePtr module) {
  check_new_name(name, "module");
  KILN_CHECK_VALUE(module != nullptr, type_name_, ": module \"", name, "\" is null");
  children_.emplace_back(name, std::move(module));
}

void Module::collect(NamedTensors Module::*member, const std::string& prefix, bool recurse,
                     NamedTensors& out) const {
  for (const auto& [name, t] : this->*member) {
    if (t.defined()) out.emplace_back(prefix + name, t);
  }
  if (!recurse) return;
  for (const auto& [name, child] : children_)
    child->collect(member, prefix + name + ".", true, out);
}

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors out;
  collect(&Module::parameters_, "", recurse, out);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& entry : named_parameters(recurse))
    out.push_back(std::move(entry.second));
  return out;
}

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  collect(&Module::buffers_, "", recurse, out);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& entry : named_buffers(recurse))
    out.push_back(std::move(entry.second));
  return out;
}

std::vector<ModulePtr> Module::children() const {
  std::vector<ModulePtr> out;
  for (const auto& entry : children_)
    out.push_back(entry.second);
  return out;
}

NamedModules Module::named_modules() {
  // A non-owning handle to this module: the caller already holds it.
  NamedModules out{{"", ModulePtr(ModulePtr(), this)}};
  for (const auto& [name, child] : children_) {
    for (auto& [sub_name, sub] : child->named_modules()) {
      out.emplace_back(sub_name.empty() ? name : name + "." + sub_name,
                       sub_name.empty() ? child : sub);
    }
  }
  return out;
}

void Module::collect_state(const std::string& prefix, StateDict& out) const {
  for (const auto& [name, t] : parameters_) {
    if (t.defined()) out.emplace_back(prefix + name, t);
  }
  for (const auto& [name, t] : buffers_) {
    if (t.defined()) out.emplace_back(prefix + name, t);
  }
  for (const auto& [name, child] : children_)
    child->collect_state(prefix + name + ".", out);
}

StateDict Module::state_dict() const {
  StateDict out;
  collect_state("", out);
  return out;
}

void Module::load_state_dict(const StateDict& dict, bool strict) {
  StateDict own = state_dict();
  // Every problem is found before anything is copied, so a failed load
  // leaves the module as it was.
  std::vector<std::string> missing, unexpected, mismatched;
  for (const auto& [name, target] : own) {
    const Tensor* source = find_entry(dict, name);
    if (!source) {
      missing.push_back(name);
    } else if (source->shape() != target.shape()) {
      mismatched.push_back(str("size mismatch for \"", name, "\": copying a tensor of shape ",
                               source->shape(), " into one of shape ", target.shape()));
    }
  }
  for (const auto& [name, source] : dict) {
    if (!find_entry(own, name)) unexpected.push_back(name);
  }
  std::string problems;
  if (strict && !missing.empty()) problems += "; missing key(s) " + quoted_list(missing);
  if (strict && !unexpected.empty()) problems += "; unexpected key(s) " + quoted_list(unexpected);
  for (const auto& m : mismatched)
    problems += "; " + m;
  KILN_CHECK(problems.empty(), "load_state_dict for ", type_name_, ": ", problems.substr(2));

  NoGradGuard no_grad;
  for (const auto& [name, target] : own) {
    if (const Tensor* source = find_entry(dict, name)) copy_(target, *source);
  }
}

Module& Module::train(bool on) {
  training_ = on;
  for (const auto& entry : children_)
    entry.second->train(on);
  return *this;
}

void Module::zero_grad() {
  for (const Tensor& p : parameters())
    set_grad(p, Tensor());
}

void Module::pretty_print(std::ostream& os, int indent) const {
  os << type_name_ << "(" << extra_repr();
  if (children_.empty()) {
    os << ")";
    return;
  }
  std::string pad(size_t(indent + 2), ' ');
  os << "\n";
  for (const auto& [name, child] : children_) {
    os << pad << "(" << name << "): ";
    child->pretty_print(os, indent + 2);
    os << "\n";
  }
  os << std::string(size_t(indent), ' ') << ")";
}

std::ostream& operator<<(std::ostream& os, const Module& m) {
  m.pretty_print(os);
  return os;
}

}  // namespace kiln::nn
