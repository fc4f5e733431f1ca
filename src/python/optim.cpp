// kiln._C.optim: the optimizer updates of kiln/optim/functional.h, each
// function one call. kiln/optim (Python) keeps torch.optim's param_groups
// and state and calls them from each optimizer's step().
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>

#include "convert.h"
#include "kiln/autograd/autograd.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/dispatch.h"
#include "kiln/optim/functional.h"

namespace kiln::python {

namespace {

// `with _C.optim.outside_recording():` runs its block as if no trace were
// recording on this thread (PauseRecording as a context manager).
struct OutsideRecording {
  std::optional<PauseRecording> pause;
};

}  // namespace

void bind_optim(nb::module_& m) {
  nb::module_ optim = m.def_submodule("optim", "kiln/optim's optimizer updates");
  optim.def("kind_names", &optimizer_kind_names);
  optim.def("defaults", [](const std::string& kind) { return optimizer_kind(kind).defaults; });
  optim.def("state_names",
            [](const std::string& kind) { return optimizer_kind(kind).state_names; });
  optim.def(
      "complete_options",
      [](const std::string& kind, const Hyperparams& overrides, const std::string& where) {
        return complete_options(optimizer_kind(kind), overrides, where);
      },
      nb::arg("kind"), nb::arg("overrides"), nb::arg("where") = "");
  optim.def("init_state", [](const std::string& kind, const Tensor& param, TensorMap state,
                             const Hyperparams& options) {
    init_state(optimizer_kind(kind), param, state, options);
    return state;
  });
  optim.def(
      "update_parameters",
      [](const std::string& kind, const std::vector<Tensor>& params,
         const std::vector<Tensor>& grads, std::vector<TensorMap> states,
         const Hyperparams& options, double lr, std::optional<Tensor> lr_tensor) {
        update_parameters(optimizer_kind(kind), params, grads, states, options,
                          {lr, lr_tensor.value_or(Tensor())});
        return states;
      },
      nb::arg("kind"), nb::arg("params"), nb::arg("grads"), nb::arg("states"), nb::arg("options"),
      nb::arg("lr"), nb::arg("lr_tensor").none(), nb::call_guard<nb::gil_scoped_release>());

  nb::class_<OutsideRecording>(optim, "outside_recording")
      .def(nb::init<>())
      .def("__enter__", [](OutsideRecording& self) { self.pause.emplace(); })
      .def("__exit__", [](OutsideRecording& self, nb::args) { self.pause.reset(); });

  // nn.Module.load_state_dict copies into the parameters it already holds.
  m.def("_copy_no_grad", [](const Tensor& dst, const Tensor& src) {
    NoGradGuard guard;
    copy_(dst, src);
  });
}

}  // namespace kiln::python
