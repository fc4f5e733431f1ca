// Sequential (a chain of single-input modules) and ModuleList (a list of
// modules that its owner calls as it likes). Children are named "0", "1", ...
// in insertion order, so their parameters are "0.weight", "1.bias", ...
#pragma once

#include <initializer_list>
#include <memory>
#include <vector>

#include "kiln/nn/module.h"

namespace kiln::nn {

class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}
  ModuleList(std::initializer_list<ModulePtr> modules);

  void push_back(ModulePtr module);
  size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  // Negative indices count from the end, as in Python.
  const ModulePtr& operator[](int64_t index) const;
  // The module at `index` as its concrete type; an error when it is not one.
  template <typename M>
  std::shared_ptr<M> at(int64_t index) const {
    auto typed = std::dynamic_pointer_cast<M>((*this)[index]);
    KILN_CHECK_TYPE(typed != nullptr, type_name(), ": module ", index, " is a ",
                    (*this)[index]->type_name(), ", not the requested type");
    return typed;
  }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 protected:
  explicit ModuleList(const char* type_name) : Module(type_name) {}

 private:
  std::vector<ModulePtr> modules_;
};

// forward(x) runs each module on the previous one's output.
class Sequential : public ModuleList {
 public:
  Sequential() : ModuleList("Sequential") {}
  Sequential(std::initializer_list<ModulePtr> modules);
  // Sequential(linear, relu, ...) from shared_ptrs of any module types.
  template <typename... Ms>
  requires(sizeof...(Ms) > 0 &&
           (std::is_convertible_v<Ms, ModulePtr> && ...)) explicit Sequential(Ms&&... modules)
      : Sequential({ModulePtr(std::forward<Ms>(modules))...}) {}

  Tensor forward(const Tensor& x) override;
};

}  // namespace kiln::nn
