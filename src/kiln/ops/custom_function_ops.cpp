// custom_function: a custom autograd Function as one graph node
// (custom_function_ops.h). The table of callbacks is process-wide and only
// grows: a compiled graph may run its node at any later time.
#include "kiln/ops/custom_function_ops.h"

#include <deque>
#include <memory>
#include <mutex>

#include "kiln/core/factory.h"
#include "kiln/kernels/cpu/copy.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/grad_util.h"
#include "kiln/ops/registry.h"

namespace kiln {
namespace {

struct CallbackTable {
  std::mutex mutex;
  std::deque<std::unique_ptr<CustomFunctionCallbacks>> entries;  // index = id
};

CallbackTable& callback_table() {
  static CallbackTable* table = new CallbackTable();  // never destroyed: graphs outlive statics
  return *table;
}

// The recorded call's outputs, which its node's kernel hands out instead of
// running the forward again (dispatch_custom_function).
thread_local const std::vector<Tensor>* t_computed = nullptr;
thread_local int64_t t_computed_id = -1;

std::string function_label(const CustomFunctionCallbacks& fn) {
  return str("custom_function (autograd Function ", fn.name, ")");
}

std::string describe(const TensorMeta& m) {
  return str(m.dtype, m.shape);
}

InferResult infer_custom_function(const InferArgs& args) {
  const CustomFunctionCallbacks& fn = custom_function_callbacks(args.attrs.get_int("id"));
  KILN_CHECK(args.inputs.size() == fn.inputs.size(), function_label(fn), ": expected ",
             fn.inputs.size(), " inputs, got ", args.inputs.size());
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    const TensorMeta& got = args.inputs[i];
    KILN_CHECK(is_static(got.shape), function_label(fn), ": input ", i, " has symbolic shape ",
               got.shape,
               ", but a custom Function's node keeps the shapes it was recorded with; record it "
               "with static shapes (hybridize(dynamic=False), kiln.jit.trace without "
               "dynamic_shapes)");
    const TensorMeta& want = fn.inputs[i];
    KILN_CHECK(got.dtype == want.dtype && same_dims(got.shape, want.shape), function_label(fn),
               ": input ", i, " is ", describe(got), ", but the Function was recorded with ",
               describe(want));
  }
  return InferResult{fn.outputs, {}};
}

// A tensor over a kernel's input buffer, for the forward callback to read.
Tensor tensor_over(const cpu::StridedView& v) {
  IntList shape(v.shape, v.shape + v.ndim), strides(v.strides, v.strides + v.ndim);
  if (v.data == nullptr) return make_tensor(shape, v.dtype);  // no elements
  return from_blob(
      v.data, shape, v.dtype, [] {}, strides);
}

void custom_function_kernel(const KernelArgs& args) {
  const int64_t id = args.attrs.get_int("id");
  const CustomFunctionCallbacks& fn = custom_function_callbacks(id);
  std::vector<Tensor> results;
  if (t_computed != nullptr && t_computed_id == id) {
    results = *t_computed;
    t_computed = nullptr;
  } else {
    std::vector<Tensor> inputs;
    for (const cpu::StridedView& v : args.inputs)
      inputs.push_back(tensor_over(v));
    PauseRecording pause;  // the forward's ops are this node's, not the graph's
    results = fn.forward(inputs);
  }
  KILN_CHECK(results.size() == args.outputs.size(), function_label(fn), ": forward returned ",
             results.size(), " tensors where the graph recorded ", args.outputs.size());
  for (size_t i = 0; i < results.size(); ++i) {
    const Tensor& r = results[i];
    const TensorMeta& want = fn.outputs[i];
    KILN_CHECK(r.defined() && r.dtype() == want.dtype && same_dims(to_dims(r.shape()), want.shape),
               function_label(fn), ": forward returned output ", i, " as ",
               r.defined() ? str(r.dtype(), r.shape()) : std::string("None"),
               " where the graph recorded ", describe(want));
    cpu::copy_convert(args.outputs[i], view_of(r));
  }
}

// Whether a gradient of shape `from` can be summed back to `to`.
bool sums_back_to(const IntList& from, const IntList& to) {
  if (to.size() > from.size()) return false;
  for (size_t i = 0; i < to.size(); ++i) {
    int64_t t = to[to.size() - 1 - i], f = from[from.size() - 1 - i];
    if (t != f && t != 1) return false;
  }
  return true;
}

std::vector<Tensor> custom_function_grad(const GradContext& ctx) {
  const CustomFunctionCallbacks& fn = custom_function_callbacks(ctx.attrs().get_int("id"));
  std::vector<Tensor> saved;
  for (const SavedSlot& slot : fn.saved) {
    if (slot.kind == SavedSlot::Input) saved.push_back(ctx.input(slot.index));
    if (slot.kind == SavedSlot::Output) saved.push_back(ctx.output(slot.index));
    if (slot.kind == SavedSlot::None) saved.emplace_back();
  }
  std::vector<Tensor> grad_outputs;
  for (size_t i = 0; i < fn.outputs.size(); ++i) {
    const Tensor& g = ctx.grad_output(i);
    bool blocked = i < fn.non_differentiable.size() && fn.non_differentiable[i];
    if (!blocked) {
      grad_outputs.push_back(g);
      continue;
    }
    grad_outputs.push_back(fn.materialize_grads ? zeros(g.shape(), g.dtype()) : Tensor());
  }
  std::vector<bool> needs;
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    needs.push_back(ctx.needs_input_grad(i));
  std::vector<Tensor> grads = fn.backward(saved, grad_outputs, needs);
  KILN_CHECK(grads.size() == ctx.num_inputs(), "function ", fn.name,
             "Backward returned an incorrect number of gradients (expected ", ctx.num_inputs(),
             ", got ", grads.size(), ")");
  for (size_t i = 0; i < grads.size(); ++i) {
    Tensor& g = grads[i];
    if (!g.defined() || !needs[i]) {
      g = Tensor();
      continue;
    }
    IntList shape = ctx.input_shape(i);
    if (g.shape() != shape) {
      KILN_CHECK(sums_back_to(g.shape(), shape), "Function ", fn.name,
                 "Backward returned an invalid gradient at index ", i, " - got ", g.shape(),
                 " but expected shape compatible with ", shape);
      g = sum_to(g, shape);
    }
    if (g.dtype() != ctx.input_meta(i).dtype) g = to(g, ctx.input_meta(i).dtype);
  }
  return grads;
}

}  // namespace

int64_t register_custom_function(CustomFunctionCallbacks callbacks) {
  CallbackTable& table = callback_table();
  std::lock_guard<std::mutex> lock(table.mutex);
  table.entries.push_back(std::make_unique<CustomFunctionCallbacks>(std::move(callbacks)));
  return int64_t(table.entries.size()) - 1;
}

const CustomFunctionCallbacks& custom_function_callbacks(int64_t id) {
  CallbackTable& table = callback_table();
  std::lock_guard<std::mutex> lock(table.mutex);
  KILN_CHECK(id >= 0 && size_t(id) < table.entries.size(),
             "custom_function: no custom autograd Function is registered under id ", id,
             " in this process; a graph holding one runs only in the process that recorded it");
  const CustomFunctionCallbacks& entry = *table.entries[size_t(id)];
  KILN_CHECK(entry.forward && entry.backward, function_label(entry),
             ": its callbacks were released (the program is exiting)");
  return entry;
}

void release_custom_function_callbacks() {
  CallbackTable& table = callback_table();
  std::lock_guard<std::mutex> lock(table.mutex);
  for (std::unique_ptr<CustomFunctionCallbacks>& entry : table.entries) {
    entry->forward = nullptr;
    entry->backward = nullptr;
  }
}

std::vector<Tensor> dispatch_custom_function(int64_t id, const std::vector<Tensor>& inputs,
                                             const std::vector<Tensor>& computed) {
  static const OpDef& def = op("custom_function");
  const CustomFunctionCallbacks& fn = custom_function_callbacks(id);
  t_computed = &computed;
  t_computed_id = id;
  try {
    std::vector<Tensor> outputs = dispatch(def, inputs, {{"id", id}, {"name", fn.name}});
    t_computed = nullptr;
    return outputs;
  } catch (...) {
    t_computed = nullptr;
    throw;
  }
}

void register_custom_function_ops(OpRegistry& registry) {
  // Never folded, merged or removed (has_side_effects): running it calls
  // back into the program, and no ONNX op can stand for it.
  registry.add(OpDef{
      .name = "custom_function",
      .min_inputs = 0,
      .max_inputs = -1,
      .num_outputs = -1,
      .attrs = {{"id", AttrKind::Int, AttrValue()}, {"name", AttrKind::String, AttrValue()}},
      .infer = infer_custom_function,
      .cpu = custom_function_kernel,
      .grad = custom_function_grad,
      .has_side_effects = true,
      .runs_where_issued = true,
      .onnx = onnx_not_exportable("it calls a Python autograd.Function registered at run time")});
}

}  // namespace kiln
