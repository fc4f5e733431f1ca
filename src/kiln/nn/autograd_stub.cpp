// TEMPORARY: the few autograd entry points nn calls, until the autograd
// layer lands on main (then this file goes and kiln_nn links kiln_autograd).
#include "kiln/autograd/autograd.h"

namespace kiln {

namespace {
thread_local bool g_grad_mode = true;
}

bool grad_mode_enabled() {
  return g_grad_mode;
}
void set_grad_mode(bool enabled) {
  g_grad_mode = enabled;
}

const Tensor& requires_grad_(const Tensor& t, bool requires_grad) {
  t.impl()->requires_grad = requires_grad;
  return t;
}

void set_grad(const Tensor&, const Tensor&) {}

}  // namespace kiln
