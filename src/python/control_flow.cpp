// kiln._C.cond / while_loop / scan / fori_loop over flat lists of tensors;
// kiln's Python layer (kiln/_control_flow.py) flattens pytrees onto them.
// Python callables become std::functions; an exception they raise passes
// through C++ unchanged.
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/vector.h>

#include "convert.h"
#include "kiln/ops/control_flow.h"

namespace kiln::python {

void bind_control_flow(nb::module_& m) {
  using nb::arg;
  m.def(
      "cond",
      [](const Tensor& pred, const TensorsFn& true_fn, const TensorsFn& false_fn,
         const Tensors& operands) { return kiln::cond(pred, true_fn, false_fn, operands, {}); },
      arg("pred"), arg("true_fn"), arg("false_fn"), arg("operands"));
  m.def(
      "while_loop",
      [](const PredicateFn& cond_fn, const TensorsFn& body_fn, const Tensors& carried,
         std::optional<int64_t> max_iterations) {
        return kiln::while_loop(cond_fn, body_fn, carried, max_iterations, {});
      },
      arg("cond_fn"), arg("body_fn"), arg("carried"), arg("max_iterations").none() = nb::none());
  m.def(
      "scan",
      [](const ScanStepFn& fn, const Tensors& init, const Tensors& xs, bool reverse,
         std::optional<int64_t> length) {
        ScanResult result = kiln::scan(fn, init, xs, reverse, length, {});
        return std::make_pair(std::move(result.carry), std::move(result.ys));
      },
      arg("fn"), arg("init"), arg("xs"), arg("reverse") = false, arg("length").none() = nb::none());
  m.def(
      "fori_loop",
      [](int64_t lower, int64_t upper, const LoopBodyFn& body, const Tensors& init) {
        return kiln::fori_loop(lower, upper, body, init, {});
      },
      arg("lower"), arg("upper"), arg("body_fn"), arg("init"));
  m.def(
      "fori_loop",
      [](const Tensor& lower, const Tensor& upper, const LoopBodyFn& body, const Tensors& init) {
        return kiln::fori_loop(lower, upper, body, init, {});
      },
      arg("lower"), arg("upper"), arg("body_fn"), arg("init"));
}

}  // namespace kiln::python
