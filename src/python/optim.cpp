// kiln._C optimizers and LR schedulers: the C++ classes of kiln/optim, each
// method one call. kiln/optim/ (Python) gives them PyTorch's signatures.
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "convert.h"
#include "kiln/autograd/autograd.h"
#include "kiln/ops/copy.h"
#include "kiln/optim/adam.h"
#include "kiln/optim/scheduler.h"
#include "kiln/optim/sgd.h"

namespace kiln::python {

void bind_optim(nb::module_& m) {
  nb::class_<Optimizer>(m, "Optimizer")
      .def("step", &Optimizer::step, nb::call_guard<nb::gil_scoped_release>())
      .def("zero_grad", &Optimizer::zero_grad)
      .def("num_param_groups", &Optimizer::num_param_groups)
      .def("params", &Optimizer::params, nb::arg("group") = 0)
      .def("hyperparams", &Optimizer::hyperparams, nb::arg("group") = 0)
      .def("set_option", &Optimizer::set_option, nb::arg("name"), nb::arg("value"),
           nb::arg("group") = 0)
      .def("add_param_group",
           [](Optimizer& o, std::vector<Tensor> params, const Hyperparams& options) {
             o.add_param_group({std::move(params), options});
           })
      .def("state_buffers", [](const Optimizer& o, int64_t i) { return o.state(i).buffers; })
      .def("state_step", [](const Optimizer& o, int64_t i) { return o.state(i).step; });

  nb::class_<SGD, Optimizer>(m, "SGD").def(
      "__init__", [](SGD* self, std::vector<Tensor> params, double lr, double momentum,
                     double dampening, double weight_decay, bool nesterov) {
        new (self) SGD(std::move(params), {.lr = lr,
                                           .momentum = momentum,
                                           .dampening = dampening,
                                           .weight_decay = weight_decay,
                                           .nesterov = nesterov});
      });
  auto adam_options = [](double lr, double beta1, double beta2, double eps, double weight_decay,
                         bool amsgrad) {
    return AdamOptions{.lr = lr,
                       .beta1 = beta1,
                       .beta2 = beta2,
                       .eps = eps,
                       .weight_decay = weight_decay,
                       .amsgrad = amsgrad};
  };
  nb::class_<Adam, Optimizer>(m, "Adam").def(
      "__init__", [adam_options](Adam* self, std::vector<Tensor> params, double lr, double beta1,
                                 double beta2, double eps, double weight_decay, bool amsgrad) {
        new (self)
            Adam(std::move(params), adam_options(lr, beta1, beta2, eps, weight_decay, amsgrad));
      });
  nb::class_<AdamW, Adam>(m, "AdamW")
      .def("__init__", [adam_options](AdamW* self, std::vector<Tensor> params, double lr,
                                      double beta1, double beta2, double eps, double weight_decay,
                                      bool amsgrad) {
        new (self)
            AdamW(std::move(params), adam_options(lr, beta1, beta2, eps, weight_decay, amsgrad));
      });

  // The scheduler keeps a reference to the optimizer: keep_alive holds it.
  nb::class_<LRScheduler>(m, "LRScheduler")
      .def("step", &LRScheduler::step)
      .def("get_last_lr", &LRScheduler::get_last_lr)
      .def_prop_ro("last_epoch", &LRScheduler::last_epoch)
      .def_prop_ro("base_lrs", &LRScheduler::base_lrs);
  nb::class_<StepLR, LRScheduler>(m, "StepLR")
      .def(nb::init<Optimizer&, int64_t, double>(), nb::keep_alive<1, 2>());
  nb::class_<CosineAnnealingLR, LRScheduler>(m, "CosineAnnealingLR")
      .def(nb::init<Optimizer&, int64_t, double>(), nb::keep_alive<1, 2>());

  // nn.Module.load_state_dict copies into the parameters it already holds.
  m.def("_copy_no_grad", [](const Tensor& dst, const Tensor& src) {
    NoGradGuard guard;
    copy_(dst, src);
  });
}

}  // namespace kiln::python
