// custom_function: a custom autograd Function (autograd/function_node.h,
// kiln.autograd.Function) as one node of a recorded graph, with the
// Function's own forward and backward. Its attributes are `id`, a key into
// this process's table of callbacks, and `name`, the Function's (for the IR
// text and errors):
//
//   %y = custom_function[id=3, name="ClampGrad"](%x)
//
// Its kernel runs the forward callback (outside any recording, without grad)
// and copies the results into the node's outputs; its grad rule calls the
// backward callback, written with kiln ops, so graph autodiff records the
// Function's backward into the backward graph. The callbacks live in this
// process only: saving or exporting such a graph is refused (python/kiln's
// jit save and onnx export name the Function), and a graph read back in
// another process fails naming the id. Shapes are the ones recorded: static.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kiln/ops/op.h"

namespace kiln {

// Which tensor a saved slot of the Function's backward reads: node input or
// output `index`, or nothing (a None saved).
struct SavedSlot {
  enum Kind { None, Input, Output };
  Kind kind = None;
  size_t index = 0;
};

struct CustomFunctionCallbacks {
  std::string name;
  std::vector<TensorMeta> inputs, outputs;  // as recorded (static shapes)
  // Node inputs in, one tensor per node output out. The op's kernel runs it
  // with recording paused; the caller's callback turns grad mode off.
  std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)> forward;
  // The saved tensors (per `saved`), one gradient per output (zeros where
  // none arrived, undefined for a non-differentiable output when grads are
  // not materialized) and which inputs need one -> one gradient per input.
  std::function<std::vector<Tensor>(const std::vector<Tensor>& saved,
                                    const std::vector<Tensor>& grad_outputs,
                                    const std::vector<bool>& needs_input_grad)>
      backward;
  std::vector<SavedSlot> saved;
  std::vector<bool> non_differentiable;  // per output
  bool materialize_grads = true;
};

// Adds the callbacks to this process's table; returns their id. Entries stay
// for the life of the process (compiled graphs refer to them by id).
int64_t register_custom_function(CustomFunctionCallbacks callbacks);
// The entry of `id`; an error naming the id when this process has none.
const CustomFunctionCallbacks& custom_function_callbacks(int64_t id);
// Drops every entry's callbacks (the Python package does it at exit, while
// the functions they hold can still be freed); a node run later fails
// naming its Function.
void release_custom_function_callbacks();

// Dispatches custom_function `id` on `inputs`, so that a recording graph
// gets one node. `computed`: the outputs the caller's forward already gave
// (the recorded call), copied into the node's outputs instead of running
// the forward a second time.
std::vector<Tensor> dispatch_custom_function(int64_t id, const std::vector<Tensor>& inputs,
                                             const std::vector<Tensor>& computed);

// The op tables' tests exempt it: it runs callbacks registered at run time,
// so it can have no PyTorch row (tests/python/test_autograd_function_compiled.py
// and tests/cpp/autograd_function_test.cpp test it).
inline bool runs_registered_callbacks(const OpDef& def) {
  return def.name == "custom_function";
}

}  // namespace kiln
