#include "kiln/nn/container.h"

#include <string>

namespace kiln::nn {

ModuleList::ModuleList(std::initializer_list<ModulePtr> modules) : ModuleList("ModuleList") {
  for (const auto& m : modules)
    push_back(m);
}

void ModuleList::push_back(ModulePtr module) {
  add_child(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

const ModulePtr& ModuleList::operator[](int64_t index) const {
  int64_t n = int64_t(modules_.size());
  KILN_CHECK_INDEX(index >= -n && index < n, type_name(), ": index ", index,
                   " is out of range for ", n, " modules");
  return modules_[size_t(index < 0 ? index + n : index)];
}

Sequential::Sequential(std::initializer_list<ModulePtr> modules) : ModuleList("Sequential") {
  for (const auto& m : modules)
    push_back(m);
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor out = x;
  for (const auto& m : *this)
    out = m->forward(out);
  return out;
}

}  // namespace kiln::nn
