// lstm_cell_pointwise and gru_cell_pointwise: the elementwise tail of an
// LSTM or GRU step as one op (kernels/cpu/rnn.h), so a step is two products
// and one pass over the gates instead of a dozen small ops.
//
//   lstm_cell_pointwise(gi, gh, c) -> (h', c')
//     i, f, o = sigmoid(gi + gh), g = tanh(gi + gh)   [each H wide, in that order]
//     c' = f c + i g,  h' = o tanh(c')
//   gru_cell_pointwise(gi, gh, h) -> h'
//     r, z = sigmoid(gi + gh),  n = tanh(gi_n + r gh_n)
//     h' = (1 - z) n + z h
//
// Their backward rules recompute the gates from the inputs (the forward
// keeps nothing extra) in one more fused op each, lstm_cell_pointwise_backward
// and gru_cell_pointwise_backward; while a backward is itself recorded
// (create_graph) they are written in kiln ops instead, so a gradient can be
// differentiated again. The backward ops have no rules of their own, as
// conv2d's backward ops.
#include "kiln/ops/rnn.h"

#include "kiln/kernels/cpu/rnn.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/infer_util.h"
#include "kiln/ops/kernel_util.h"
#include "kiln/ops/registry.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/view.h"

namespace kiln {
namespace {

// Every input a matrix of the same floating dtype; gi and gh [B, gates * H]
// for the state's [B, H]. Returns the state's meta.
const TensorMeta& check_cell(const InferArgs& args, int64_t gates, const char* state) {
  const TensorMeta &gi = args.inputs[0], &gh = args.inputs[1], &s = args.inputs[2];
  check_floating(args, 2);
  for (size_t k = 0; k < 2; ++k) {
    KILN_CHECK_TYPE(args.inputs[k].dtype == s.dtype, args.op.name, ": expected ",
                    k == 0 ? "gi" : "gh", " of dtype ", s.dtype, " (the ", state, "'s), got ",
                    args.inputs[k].dtype);
  }
  KILN_CHECK(s.dim() == 2, args.op.name, ": expected a ", state, " of 2 dims [batch, hidden], got ",
             s.shape);
  const DimList expected{s.shape[0], Dim(gates) * s.shape[1]};
  KILN_CHECK(equal_or_assumed(gi.shape, expected) && equal_or_assumed(gh.shape, expected),
             args.op.name, ": expected gi and gh of shape ", expected, " (", gates,
             " gates for the ", state, " of shape ", s.shape, "), got ", gi.shape, " and ",
             gh.shape);
  return s;
}

InferResult infer_lstm(const InferArgs& args) {
  const TensorMeta& c = check_cell(args, 4, "cell state");
  TensorMeta state{c.dtype, c.shape};
  return InferResult{{state, state}, {}};
}

InferResult infer_gru(const InferArgs& args) {
  const TensorMeta& h = check_cell(args, 3, "hidden state");
  return InferResult{{TensorMeta{h.dtype, h.shape}}, {}};
}

// Inputs `first`.. are more states: the state's shape and dtype.
void check_states(const InferArgs& args, size_t first, const char* state,
                  std::initializer_list<const char*> names) {
  const TensorMeta& s = args.inputs[2];
  size_t k = first;
  for (const char* name : names) {
    const TensorMeta& m = args.inputs[k++];
    KILN_CHECK(m.dtype == s.dtype && equal_or_assumed(m.shape, s.shape), args.op.name,
               ": expected ", name, " of dtype ", s.dtype, " and shape ", s.shape, " (the ", state,
               "'s), got ", m.dtype, " ", m.shape);
  }
}

// (gi, gh, c, c', dh', dc') -> (d gates, dc)
InferResult infer_lstm_backward(const InferArgs& args) {
  const TensorMeta& c = check_cell(args, 4, "cell state");
  check_states(args, 3, "cell state", {"c_new", "grad_h", "grad_c"});
  const TensorMeta& gi = args.inputs[0];
  return InferResult{{TensorMeta{gi.dtype, gi.shape}, TensorMeta{c.dtype, c.shape}}, {}};
}

// (gi, gh, h, dh') -> (dgi, dgh, dh)
InferResult infer_gru_backward(const InferArgs& args) {
  const TensorMeta& h = check_cell(args, 3, "hidden state");
  check_states(args, 3, "hidden state", {"grad_h"});
  const TensorMeta& gi = args.inputs[0];
  TensorMeta gates{gi.dtype, gi.shape};
  return InferResult{{gates, gates, TensorMeta{h.dtype, h.shape}}, {}};
}

void lstm_kernel(const KernelArgs& args) {
  ContiguousInput gi(args.inputs[0]), gh(args.inputs[1]), c(args.inputs[2]);
  const cpu::StridedView &h_out = args.outputs[0], &c_out = args.outputs[1];
  visit_floating(h_out.dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::lstm_cell_pointwise(gi.data<T>(), gh.data<T>(), c.data<T>(), h_out.ptr<T>(),
                             c_out.ptr<T>(), h_out.shape[0], h_out.shape[1]);
  });
}

void gru_kernel(const KernelArgs& args) {
  ContiguousInput gi(args.inputs[0]), gh(args.inputs[1]), h(args.inputs[2]);
  const cpu::StridedView& h_out = args.outputs[0];
  visit_floating(h_out.dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::gru_cell_pointwise(gi.data<T>(), gh.data<T>(), h.data<T>(), h_out.ptr<T>(), h_out.shape[0],
                            h_out.shape[1]);
  });
}

void lstm_backward_kernel(const KernelArgs& args) {
  ContiguousInput gi(args.inputs[0]), gh(args.inputs[1]), c(args.inputs[2]), c_new(args.inputs[3]);
  ContiguousInput dh(args.inputs[4]), dc_new(args.inputs[5]);
  const cpu::StridedView &dgates = args.outputs[0], &dc = args.outputs[1];
  visit_floating(dc.dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::lstm_cell_pointwise_backward(gi.data<T>(), gh.data<T>(), c.data<T>(), c_new.data<T>(),
                                      dh.data<T>(), dc_new.data<T>(), dgates.ptr<T>(), dc.ptr<T>(),
                                      dc.shape[0], dc.shape[1]);
  });
}

void gru_backward_kernel(const KernelArgs& args) {
  ContiguousInput gi(args.inputs[0]), gh(args.inputs[1]), h(args.inputs[2]), dh(args.inputs[3]);
  const cpu::StridedView &dgi = args.outputs[0], &dgh = args.outputs[1], &dh_prev = args.outputs[2];
  visit_floating(dh_prev.dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::gru_cell_pointwise_backward(gi.data<T>(), gh.data<T>(), h.data<T>(), dh.data<T>(),
                                     dgi.ptr<T>(), dgh.ptr<T>(), dh_prev.ptr<T>(), dh_prev.shape[0],
                                     dh_prev.shape[1]);
  });
}

// A saved output comes back requiring grad only while the backward is
// itself being recorded (create_graph; autograd/op_node.cpp): then the rule
// must be made of differentiable ops.
bool recording_backward(const GradContext& ctx) {
  return ctx.output(0).requires_grad();
}

// sigmoid'(a) = s (1 - s) and tanh'(a) = 1 - t² for s = sigmoid(a), t = tanh(a).
Tensor dsigmoid(const Tensor& s) {
  return s * (1.0 - s);
}
Tensor dtanh(const Tensor& t) {
  return 1.0 - t * t;
}

// With a = gi + gh split into the gates i, f, g, o and t = tanh(c'):
//   dc' (total) = dc'_out + dh' o (1 - t²)
//   da_i = dc' g i' ; da_f = dc' c f' ; da_g = dc' i g' ; da_o = dh' t o'
//   dgi = dgh = da ; dc = dc' f
std::vector<Tensor> lstm_grad(const GradContext& ctx) {
  std::vector<Tensor> grads(3);
  if (!recording_backward(ctx)) {
    static const OpDef& backward = op("lstm_cell_pointwise_backward");
    std::vector<Tensor> d =
        dispatch(backward, {ctx.input(0), ctx.input(1), ctx.input(2), ctx.output(1),
                            ctx.grad_output(0), ctx.grad_output(1)});
    if (ctx.needs_input_grad(0)) grads[0] = d[0];
    if (ctx.needs_input_grad(1)) grads[1] = d[0];
    if (ctx.needs_input_grad(2)) grads[2] = d[1];
    return grads;
  }
  std::vector<Tensor> a = chunk(ctx.input(0) + ctx.input(1), 4, 1);
  Tensor i = sigmoid(a[0]), f = sigmoid(a[1]), g = tanh(a[2]), o = sigmoid(a[3]);
  Tensor t = tanh(ctx.output(1));
  const Tensor &dh = ctx.grad_output(0), &dc_out = ctx.grad_output(1);
  Tensor dc = dc_out + dh * o * dtanh(t);
  Tensor da = cat({dc * g * dsigmoid(i), dc * ctx.input(2) * dsigmoid(f), dc * i * dtanh(g),
                   dh * t * dsigmoid(o)},
                  1);
  if (ctx.needs_input_grad(0)) grads[0] = da;
  if (ctx.needs_input_grad(1)) grads[1] = da;
  if (ctx.needs_input_grad(2)) grads[2] = dc * f;
  return grads;
}

// With r, z, n as in the forward and hn = gh_n:
//   dn = dh' (1 - z) ; dz = dh' (h - n) ; dh = dh' z
//   da_n = dn n' ; da_r = da_n hn r' ; da_z = dz z'
//   dgi = [da_r, da_z, da_n] ; dgh = [da_r, da_z, da_n r]
std::vector<Tensor> gru_grad(const GradContext& ctx) {
  std::vector<Tensor> grads(3);
  if (!recording_backward(ctx)) {
    static const OpDef& backward = op("gru_cell_pointwise_backward");
    std::vector<Tensor> d =
        dispatch(backward, {ctx.input(0), ctx.input(1), ctx.input(2), ctx.grad_output(0)});
    for (size_t k = 0; k < 3; ++k) {
      if (ctx.needs_input_grad(k)) grads[k] = d[k];
    }
    return grads;
  }
  const Tensor &gi = ctx.input(0), &gh = ctx.input(1), &h = ctx.input(2);
  std::vector<Tensor> xi = chunk(gi, 3, 1), hi = chunk(gh, 3, 1);
  Tensor r = sigmoid(xi[0] + hi[0]), z = sigmoid(xi[1] + hi[1]);
  Tensor n = tanh(xi[2] + r * hi[2]);
  const Tensor& dy = ctx.grad_output(0);
  Tensor da_n = dy * (1.0 - z) * dtanh(n);
  Tensor da_rz = cat({da_n * hi[2] * dsigmoid(r), dy * (h - n) * dsigmoid(z)}, 1);
  if (ctx.needs_input_grad(0)) grads[0] = cat({da_rz, da_n}, 1);
  if (ctx.needs_input_grad(1)) grads[1] = cat({da_rz, da_n * r}, 1);
  if (ctx.needs_input_grad(2)) grads[2] = dy * z;
  return grads;
}

}  // namespace

void register_rnn_ops(OpRegistry& registry) {
  registry.add(OpDef{.name = "lstm_cell_pointwise",
                     .min_inputs = 3,
                     .max_inputs = 3,
                     .num_outputs = 2,
                     .infer = infer_lstm,
                     .cpu = lstm_kernel,
                     .grad = lstm_grad,
                     .kind = OpKind::Opaque,
                     .onnx = {}});  // kiln's own: the exporter writes what it stands for
  registry.add(OpDef{.name = "gru_cell_pointwise",
                     .min_inputs = 3,
                     .max_inputs = 3,
                     .infer = infer_gru,
                     .cpu = gru_kernel,
                     .grad = gru_grad,
                     .kind = OpKind::Opaque,
                     .onnx = {}});
  // Their backward rules' fused kernels (no rules of their own).
  registry.add(OpDef{.name = "lstm_cell_pointwise_backward",
                     .min_inputs = 6,
                     .max_inputs = 6,
                     .num_outputs = 2,
                     .infer = infer_lstm_backward,
                     .cpu = lstm_backward_kernel,
                     .kind = OpKind::Opaque,
                     .onnx = onnx_not_exportable(
                         "a backward op of lstm_cell_pointwise: ONNX models hold forward graphs")});
  registry.add(OpDef{.name = "gru_cell_pointwise_backward",
                     .min_inputs = 4,
                     .max_inputs = 4,
                     .num_outputs = 3,
                     .infer = infer_gru_backward,
                     .cpu = gru_backward_kernel,
                     .kind = OpKind::Opaque,
                     .onnx = onnx_not_exportable(
                         "a backward op of gru_cell_pointwise: ONNX models hold forward graphs")});
}

std::pair<Tensor, Tensor> lstm_cell_pointwise(const Tensor& gi, const Tensor& gh, const Tensor& c) {
  static const OpDef& def = op("lstm_cell_pointwise");
  std::vector<Tensor> out = dispatch(def, {gi, gh, c});
  return {std::move(out[0]), std::move(out[1])};
}

Tensor gru_cell_pointwise(const Tensor& gi, const Tensor& gh, const Tensor& h) {
  static const OpDef& def = op("gru_cell_pointwise");
  return dispatch1(def, {gi, gh, h});
}

}  // namespace kiln
