// kiln._C.autograd: custom Functions (kiln/autograd/function.py drives them)
// and tensor hooks. The Python callables handed to C++ (a Function's
// backward, a hook) are called by the backward engine, which runs with the
// GIL released: each call takes it, and so does dropping the last reference.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "kiln/autograd/function_node.h"
#include "kiln/autograd/hooks.h"

namespace kiln::python {

namespace nb = nanobind;

namespace {

using OptionalTensors = std::vector<std::optional<Tensor>>;

// A Python callable that C++ owns: copies share it, and the last one may be
// dropped on any thread, holding the GIL or not.
class PythonCallable {
 public:
  explicit PythonCallable(nb::object fn) : holder_(std::make_shared<Holder>(std::move(fn))) {}

  // The caller holds the GIL.
  template <typename... Args>
  nb::object operator()(Args&&... args) const {
    return holder_->fn(std::forward<Args>(args)...);
  }

 private:
  struct Holder {
    explicit Holder(nb::object f) : fn(std::move(f)) {}
    ~Holder() {
      if (!Py_IsInitialized()) {
        fn.release();  // the interpreter is gone: nothing left to free
        return;
      }
      nb::gil_scoped_acquire gil;
      fn.reset();
    }
    nb::object fn;
  };
  std::shared_ptr<Holder> holder_;
};

std::vector<Tensor> to_tensors(const OptionalTensors& items) {
  std::vector<Tensor> out;
  out.reserve(items.size());
  for (const std::optional<Tensor>& t : items)
    out.push_back(t.value_or(Tensor()));
  return out;
}

OptionalTensors to_optional(const std::vector<Tensor>& tensors) {
  OptionalTensors out;
  out.reserve(tensors.size());
  for (const Tensor& t : tensors)
    out.push_back(t.defined() ? std::optional<Tensor>(t) : std::nullopt);
  return out;
}

// The Python backward takes a list of gradients (None where undefined) and
// returns one per input (Function.apply's wrapper checks and pads it).
FunctionBackward python_backward(nb::object fn) {
  return
      [call = PythonCallable(std::move(fn))](FunctionContext&, const std::vector<Tensor>& grads) {
        nb::gil_scoped_acquire gil;
        nb::object result = call(to_optional(grads));
        return to_tensors(nb::cast<OptionalTensors>(result));
      };
}

// A recorded node's forward: the Python function takes the node's inputs
// and returns its outputs (tensors).
NodeForward python_node_forward(nb::object fn) {
  return [call = PythonCallable(std::move(fn))](const std::vector<Tensor>& inputs) {
    nb::gil_scoped_acquire gil;
    return nb::cast<std::vector<Tensor>>(call(inputs));
  };
}

// A recorded node's backward: (saved, grads, needs_input_grad) -> one
// gradient (or None) per node input.
NodeBackward python_node_backward(nb::object fn) {
  return [call = PythonCallable(std::move(fn))](const std::vector<Tensor>& saved,
                                                const std::vector<Tensor>& grads,
                                                const std::vector<bool>& needs) {
    nb::gil_scoped_acquire gil;
    nb::object result = call(to_optional(saved), to_optional(grads), needs);
    return to_tensors(nb::cast<OptionalTensors>(result));
  };
}

TensorHook python_hook(nb::object fn) {
  return [call = PythonCallable(std::move(fn))](const Tensor& grad) {
    nb::gil_scoped_acquire gil;
    nb::object result = call(grad);
    if (result.is_none()) return Tensor();
    if (!nb::isinstance<Tensor>(result)) {
      throw nb::type_error("a tensor hook must return None or a Tensor");
    }
    return nb::cast<Tensor>(result);
  };
}

std::pair<std::vector<Tensor>, std::shared_ptr<FunctionContext>> record(
    const std::string& name, const OptionalTensors& inputs, const std::vector<Tensor>& outputs,
    nb::object backward, const OptionalTensors& saved,
    const std::vector<Tensor>& non_differentiable, const std::vector<Tensor>& dirty,
    bool materialize_grads) {
  std::vector<Tensor> operands = to_tensors(inputs);
  auto ctx = std::make_shared<FunctionContext>(operands);
  ctx->save_for_backward(to_tensors(saved));
  ctx->mark_non_differentiable(non_differentiable);
  ctx->mark_dirty(dirty);
  ctx->set_materialize_grads(materialize_grads);
  std::vector<Tensor> recorded =
      record_function(name, ctx, operands, outputs, python_backward(std::move(backward)));
  return {std::move(recorded), std::move(ctx)};
}

std::vector<Tensor> record_node(const std::string& name, const std::vector<Tensor>& inputs,
                                const std::vector<Tensor>& outputs, nb::object forward,
                                nb::object backward, const OptionalTensors& saved,
                                const std::vector<Tensor>& non_differentiable,
                                const std::vector<Tensor>& dirty, bool materialize_grads) {
  FunctionContext ctx(inputs);
  ctx.save_for_backward(to_tensors(saved));
  ctx.mark_non_differentiable(non_differentiable);
  ctx.mark_dirty(dirty);
  ctx.set_materialize_grads(materialize_grads);
  return record_function_node(name, ctx, inputs, outputs, python_node_forward(std::move(forward)),
                              python_node_backward(std::move(backward)));
}

}  // namespace

void bind_autograd(nb::module_ m) {
  nb::class_<FunctionContext>(m, "FunctionContext")
      .def("saved_tensors",
           [](const FunctionContext& ctx) { return to_optional(ctx.saved_tensors()); });
  m.def("_release_function_nodes", &release_custom_function_callbacks,
        "Drops the recorded Functions' callbacks (at exit).");
  m.def("_records_node", &records_function_node,
        "Whether a custom Function called now becomes one custom_function graph node.");
  m.def("_record_function_node", &record_node, nb::arg("name"), nb::arg("inputs"),
        nb::arg("outputs"), nb::arg("forward"), nb::arg("backward"), nb::arg("saved"),
        nb::arg("non_differentiable"), nb::arg("dirty"), nb::arg("materialize_grads"),
        "Records a forward that ran as one custom_function node; returns the node's outputs.");
  m.def("_record_function", &record, nb::arg("name"), nb::arg("inputs"), nb::arg("outputs"),
        nb::arg("backward"), nb::arg("saved"), nb::arg("non_differentiable"), nb::arg("dirty"),
        nb::arg("materialize_grads"),
        "Hangs a custom forward's outputs on a node calling `backward`; returns (outputs, ctx).");

  // A tensor's grad_fn, as Python sees it (torch's Node): its name and the
  // nodes its gradients flow to next. Holding one keeps that graph alive.
  nb::class_<Node>(m, "Node")
      .def("name", &Node::name)
      .def_prop_ro("next_functions",
                   [](const Node& node) {
                     nb::list out;
                     for (const Edge& e : node.next_edges) {
                       nb::object next = e.node ? nb::cast(e.node) : nb::none();
                       out.append(nb::make_tuple(next, e.input_nr));
                     }
                     return nb::tuple(out);
                   })
      .def("__repr__", [](const Node& node) { return "<" + node.name() + " object>"; });
  m.def(
      "grad_fn", [](const Tensor& t) { return grad_fn(t); }, nb::arg("tensor"));

  nb::class_<HookHandle>(m, "HookHandle")
      .def("remove", &HookHandle::remove)
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](HookHandle& h, nb::args) { h.remove(); });
  m.def(
      "register_hook",
      [](const Tensor& t, nb::object hook) {
        return register_hook(t, python_hook(std::move(hook)));
      },
      nb::arg("tensor"), nb::arg("hook"));
  m.def(
      "register_post_accumulate_grad_hook",
      [](const Tensor& t, nb::object hook) {
        return register_post_accumulate_grad_hook(
            t, [call = PythonCallable(std::move(hook))](const Tensor& leaf) {
              nb::gil_scoped_acquire gil;
              call(leaf);
            });
      },
      nb::arg("tensor"), nb::arg("hook"));
  m.def(
      "queue_callback",
      [](nb::object callback) {
        queue_callback([call = PythonCallable(std::move(callback))] {
          nb::gil_scoped_acquire gil;
          call();
        });
      },
      nb::arg("callback"));
  m.def("retain_grad", &retain_grad, nb::arg("tensor"));
  m.def("retains_grad", &retains_grad, nb::arg("tensor"));
}

}  // namespace kiln::python
