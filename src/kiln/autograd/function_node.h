// Custom autograd functions: a forward the user writes with kiln ops and a
// backward the user writes too, as torch.autograd.Function. The forward runs
// without recording; its outputs get one FunctionNode whose apply calls the
// user's backward.
//
//   CustomFunction scale{
//       "Scale",
//       [](FunctionContext& ctx, const std::vector<Tensor>& in) {
//         ctx.save_for_backward({in[1]});
//         return std::vector<Tensor>{in[0] * in[1]};
//       },
//       [](FunctionContext& ctx, const std::vector<Tensor>& grad) {
//         Tensor s = ctx.saved_tensors()[0];
//         return std::vector<Tensor>{grad[0] * s, Tensor()};  // none for `s`
//       }};
//   Tensor y = apply_function(scale, {x, s})[0];   // y.grad_fn: ScaleBackward
//
// The backward returns one gradient per input (undefined: none); a gradient
// shaped like a broadcast of its input is summed back to the input's shape,
// and one of another dtype is converted. It may be differentiated again
// (create_graph): its ops are recorded like any others.
//
// While a graph records (hybridize, kiln.compile, trace) with grad mode on,
// a custom function is one custom_function node (ops/custom_function_ops.h)
// calling the same forward and backward: graph autodiff puts the backward's
// ops into the backward graph, so compiled training runs the user's
// backward, not a derivative of the forward's ops. Its backward may read
// only the function's inputs and outputs (save_for_backward of anything
// else is refused), and the node keeps the recorded shapes. With grad mode
// off (an inference trace) the forward's ops are recorded, exactly.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/autograd/node.h"
#include "kiln/ops/custom_function_ops.h"

namespace kiln {

class FunctionContext;
struct CustomFunction;
// The user's backward: one gradient per input from one per output.
using FunctionBackward =
    std::function<std::vector<Tensor>(FunctionContext& ctx, const std::vector<Tensor>& grads)>;
using FunctionForward =
    std::function<std::vector<Tensor>(FunctionContext& ctx, const std::vector<Tensor>& inputs)>;
// A recorded node's callbacks (ops/custom_function_ops.h): the forward again
// on the node's inputs, and the backward from the saved tensors.
using NodeForward = decltype(CustomFunctionCallbacks::forward);
using NodeBackward = decltype(CustomFunctionCallbacks::backward);

// What a custom function's forward leaves for its backward (torch's ctx).
class FunctionContext {
 public:
  explicit FunctionContext(const std::vector<Tensor>& inputs);

  // -- in forward --
  // Tensors (inputs or outputs) the backward reads; a later in-place write
  // to one of them makes saved_tensors() fail.
  void save_for_backward(std::vector<Tensor> tensors);
  // Outputs that carry no gradient (indices, masks): they do not require
  // grad, and their gradients reach backward as zeros (or undefined).
  void mark_non_differentiable(std::vector<Tensor> outputs);
  // Inputs the forward wrote in place and returns: their history becomes
  // this function.
  void mark_dirty(std::vector<Tensor> inputs);
  // false: gradients that never arrived reach backward undefined, not zeros.
  void set_materialize_grads(bool value) { materialize_grads_ = value; }
  bool materialize_grads() const { return materialize_grads_; }
  // For the backward of a recorded node, which makes a new context.
  void set_needs_input_grad(std::vector<bool> needs) { needs_input_grad_ = std::move(needs); }
  // Input i requires grad (and grad mode was on): backward should compute it.
  bool needs_input_grad(size_t i) const {
    return i < needs_input_grad_.size() && needs_input_grad_[i];
  }

  // -- in backward --
  // The saved tensors; an error after an in-place write to one of them, or
  // once a backward without retain_graph freed them.
  std::vector<Tensor> saved_tensors() const;

 private:
  friend std::vector<Tensor> record_function(const std::string&, std::shared_ptr<FunctionContext>,
                                             const std::vector<Tensor>&, std::vector<Tensor>,
                                             FunctionBackward);
  friend std::vector<Tensor> record_function_node(const std::string&, const FunctionContext&,
                                                  const std::vector<Tensor>&,
                                                  const std::vector<Tensor>&, NodeForward,
                                                  NodeBackward);
  friend class FunctionNode;

  struct Saved {
    Tensor value;  // an output is saved as a history-free alias (no cycle)
    uint64_t version = 0;
    bool is_output = false;
    int output_nr = 0;
  };
  // Turns to_save_ into saved_ once the outputs are known; `linked`: the
  // outputs have this node as history.
  void save_now(const std::vector<Tensor>& outputs, bool linked);
  void release();

  std::vector<bool> needs_input_grad_;
  std::vector<Tensor> to_save_, non_differentiable_, dirty_;
  std::vector<Saved> saved_;
  bool saved_now_ = false;  // saved_ holds to_save_ (record_function ran)
  bool materialize_grads_ = true;
  bool released_ = false;
  std::string node_name_;
  std::weak_ptr<Node> node_;  // to link saved outputs back to it under create_graph
};

struct CustomFunction {
  std::string name;  // its node is "<name>Backward"
  FunctionForward forward;
  FunctionBackward backward;
};

// Runs fn.forward without recording and hangs its outputs on a FunctionNode.
// Inputs may be undefined (an argument that is not a tensor).
std::vector<Tensor> apply_function(const CustomFunction& fn, const std::vector<Tensor>& inputs);

// The second half of apply_function, for a forward that already ran (the
// Python binding runs the Python forward itself): returns the outputs to
// hand out. An output that is an input not marked dirty (or one that already
// has history, or a repeated one) comes back as an alias carrying the new
// history; the others are the outputs themselves. With grad mode off or no
// input requiring grad, no node is made.
std::vector<Tensor> record_function(const std::string& name, std::shared_ptr<FunctionContext> ctx,
                                    const std::vector<Tensor>& inputs, std::vector<Tensor> outputs,
                                    FunctionBackward backward);

// Whether a custom function called now becomes a graph node (a graph
// records on this thread with grad mode on) rather than a FunctionNode.
bool records_function_node();

// The recorded form, for a forward that already ran on `inputs` (all
// defined: the node's inputs) and gave `outputs` (all defined): one
// custom_function node, whose outputs (copies of `outputs`) are returned.
// `ctx` holds what forward saved and marked; a saved tensor must be one of
// `inputs` or `outputs`, and no input may be dirty. `forward` runs the
// function again on the node's inputs when the graph runs (grad mode off);
// `backward` gets the saved tensors, in save order.
std::vector<Tensor> record_function_node(const std::string& name, const FunctionContext& ctx,
                                         const std::vector<Tensor>& inputs,
                                         const std::vector<Tensor>& outputs, NodeForward forward,
                                         NodeBackward backward);

}  // namespace kiln
