// nn::Module: the base of every layer, shaped like libtorch's. A module owns
// named parameters, buffers and child modules, each kept in registration
// order so names, parameters() and state_dict() come out the same on every
// run. Modules are held by std::shared_ptr:
//
//   auto net = std::make_shared<nn::Sequential>(
//       std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::ReLU>());
//   for (auto& [name, p] : net->named_parameters()) ...  // "0.weight", "0.bias"
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln::nn {

class Module;

// An ordered name -> tensor list: the order is part of the contract
// (state_dict keys come out in registration order, as in PyTorch).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using StateDict = NamedTensors;
using ModulePtr = std::shared_ptr<Module>;
using NamedModules = std::vector<std::pair<std::string, ModulePtr>>;

class Module {
 public:
  // `type_name` is what errors and printing call this module ("Linear").
  explicit Module(std::string type_name = "Module");
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& type_name() const { return type_name_; }

  // Single-input modules override this; the default says the module has none.
  virtual Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }

  // ---- registration (names may not repeat or contain '.') ----
  // Marks `t` as requiring grad (when defined) and returns it (a handle to
  // the stored tensor, so a layer can keep it as a member).
  // An undefined tensor registers an absent parameter (Linear without bias):
  // listings skip it, as PyTorch skips a None parameter.
  Tensor register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  Tensor register_buffer(const std::string& name, Tensor t);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

  // ---- listings: own entries first, then each child's under "child." ----
  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  std::vector<ModulePtr> children() const;
  const NamedModules& named_children() const { return children_; }
  // This module (named "") and every descendant, depth first.
  NamedModules named_modules();

  // Parameters then buffers of each module, depth first, as PyTorch orders it.
  StateDict state_dict() const;
  // Copies each value into the existing tensor (under NoGradGuard, so the
  // parameter handles an optimizer holds stay valid). strict: a missing or
  // unexpected key is an error; a wrongly shaped value always is.
  void load_state_dict(const StateDict& dict, bool strict = true);

  // Sets the mode of this module and every descendant; returns *this.
  virtual Module& train(bool on = true);
  Module& eval() { return train(false); }
  bool is_training() const { return training_; }

  // Sets every parameter's grad to undefined (PyTorch's set_to_none default).
  void zero_grad();

  // PyTorch-style printing: "Linear(in_features=3, out_features=4, bias=True)".
  virtual std::string extra_repr() const { return ""; }
  void pretty_print(std::ostream& os, int indent = 0) const;

 protected:
  void add_child(const std::string& name, ModulePtr module);

 private:
  void check_new_name(const std::string& name, const char* what) const;
  void collect(NamedTensors Module::*member, const std::string& prefix, bool recurse,
               NamedTensors& out) const;
  void collect_state(const std::string& prefix, StateDict& out) const;

  std::string type_name_;
  bool training_ = true;
  NamedTensors parameters_;
  NamedTensors buffers_;
  NamedModules children_;
};

std::ostream& operator<<(std::ostream& os, const Module& m);

}  // namespace kiln::nn
