// The cells and layers of rnn.h. Errors read as PyTorch's (torch/nn/modules/
// rnn.py and aten/src/ATen/native/RNN.cpp), with the shapes involved.
#include "kiln/nn/rnn.h"

#include "kiln/core/factory.h"
#include "kiln/core/sym_shape.h"
#include "kiln/ops/control_flow.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/rnn.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/view.h"

namespace kiln::nn::functional {

namespace {

const char* layer_name(RNNMode mode) {
  switch (mode) {
    case RNNMode::LSTM:
      return "LSTM";
    case RNNMode::GRU:
      return "GRU";
    default:
      return "RNN";
  }
}

// Zeros [B, H], B read as `like`'s dim `batch_dim` through sym_shape: in a
// trace with a dynamic batch the initial state follows the batch instead of
// freezing the example's.
Tensor zero_state(const Tensor& like, int64_t batch_dim, int64_t hidden, DType dtype) {
  const Dim shape[] = {sym_size(like, batch_dim), Dim(hidden)};
  return contiguous(expand(zeros({hidden}, dtype), shape));
}

// The part of a step after the input projection gi = x W_ihᵀ + b_ih: the
// new state (h') or (h', c').
Tensors step(RNNMode mode, const Tensor& gi, const Tensor& h, const Tensor& c, const Tensor& w_hh,
             const Tensor& b_hh) {
  Tensor gh = linear(h, w_hh, b_hh);
  switch (mode) {
    case RNNMode::LSTM: {
      auto [h_next, c_next] = lstm_cell_pointwise(gi, gh, c);
      return {h_next, c_next};
    }
    case RNNMode::GRU:
      return {gru_cell_pointwise(gi, gh, h)};
    case RNNMode::RNNTanh:
      return {tanh(gi + gh)};
    case RNNMode::RNNRelu:
      return {relu(gi + gh)};
  }
  return {};
}

// ---- cells ----

// A cell's input and state as a batch ([B, I], [B, H]), with PyTorch's
// checks; `unbatched` when x came as [I].
struct CellArgs {
  Tensor x, h, c;
  bool unbatched = false;
};

CellArgs cell_args(const char* cell, const Tensor& x, const Tensor& h, const Tensor& c,
                   const Tensor& w_ih, const Tensor& w_hh, bool with_c) {
  KILN_CHECK_VALUE(x.defined() && (x.dim() == 1 || x.dim() == 2), cell,
                   ": Expected input to be 1D or 2D, got ", x.defined() ? x.dim() : 0, "D instead");
  KILN_CHECK(w_ih.defined() && w_hh.defined() && w_ih.dim() == 2 && w_hh.dim() == 2, cell,
             ": expected 2-D weights w_ih [G*H, I] and w_hh [G*H, H]");
  CellArgs out{x, h, c, x.dim() == 1};
  const int64_t hidden = w_hh.shape()[1];
  for (Tensor* state : {&out.h, &out.c}) {
    if (state == &out.c && !with_c) continue;
    if (!state->defined()) continue;
    KILN_CHECK_VALUE(state->dim() == x.dim(), cell, ": Expected hidden state to be ", x.dim(),
                     "D for ", x.dim(), "D input, got ", state->dim(), "D instead");
    if (out.unbatched) *state = unsqueeze(*state, 0);
  }
  if (out.unbatched) out.x = unsqueeze(x, 0);
  KILN_CHECK(out.x.shape()[1] == w_ih.shape()[1], "input has inconsistent input_size: got ",
             out.x.shape()[1], " expected ", w_ih.shape()[1]);
  for (Tensor* state : {&out.h, &out.c}) {
    if (state == &out.c && !with_c) continue;
    if (!state->defined()) {
      *state = zero_state(out.x, 0, hidden, x.dtype());
      continue;
    }
    const char* name = state == &out.h ? "hidden0" : "hidden1";
    KILN_CHECK(state->shape()[0] == out.x.shape()[0], "Input batch size ", out.x.shape()[0],
               " doesn't match ", name, " batch size ", state->shape()[0]);
    KILN_CHECK(state->shape()[1] == hidden, name, " has inconsistent hidden_size: got ",
               state->shape()[1], ", expected ", hidden);
  }
  return out;
}

Tensor unbatch(const Tensor& t, bool unbatched) {
  return unbatched ? squeeze(t, 0) : t;
}

}  // namespace

RNNMode rnn_mode(const std::string& name) {
  if (name == "RNN_TANH") return RNNMode::RNNTanh;
  if (name == "RNN_RELU") return RNNMode::RNNRelu;
  if (name == "LSTM") return RNNMode::LSTM;
  KILN_CHECK_VALUE(name == "GRU", "Unrecognized RNN mode: ", name,
                   " (expected RNN_TANH, RNN_RELU, LSTM or GRU)");
  return RNNMode::GRU;
}

RNNMode rnn_nonlinearity_mode(const std::string& nonlinearity) {
  KILN_CHECK_VALUE(nonlinearity == "tanh" || nonlinearity == "relu", "Unknown nonlinearity '",
                   nonlinearity, "'. Select from 'tanh' or 'relu'.");
  return nonlinearity == "tanh" ? RNNMode::RNNTanh : RNNMode::RNNRelu;
}

int64_t gate_count(RNNMode mode) {
  switch (mode) {
    case RNNMode::LSTM:
      return 4;
    case RNNMode::GRU:
      return 3;
    default:
      return 1;
  }
}

Tensor rnn_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh,
                const Tensor& b_ih, const Tensor& b_hh, const std::string& nonlinearity) {
  RNNMode mode = rnn_nonlinearity_mode(nonlinearity);
  CellArgs a = cell_args("RNNCell", x, h, {}, w_ih, w_hh, false);
  return unbatch(step(mode, linear(a.x, w_ih, b_ih), a.h, {}, w_hh, b_hh)[0], a.unbatched);
}

std::pair<Tensor, Tensor> lstm_cell(const Tensor& x, const Tensor& h, const Tensor& c,
                                    const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                                    const Tensor& b_hh) {
  CellArgs a = cell_args("LSTMCell", x, h, c, w_ih, w_hh, true);
  Tensors next = step(RNNMode::LSTM, linear(a.x, w_ih, b_ih), a.h, a.c, w_hh, b_hh);
  return {unbatch(next[0], a.unbatched), unbatch(next[1], a.unbatched)};
}

Tensor gru_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh,
                const Tensor& b_ih, const Tensor& b_hh) {
  CellArgs a = cell_args("GRUCell", x, h, {}, w_ih, w_hh, false);
  return unbatch(step(RNNMode::GRU, linear(a.x, w_ih, b_ih), a.h, {}, w_hh, b_hh)[0], a.unbatched);
}

// ---- layers ----

namespace {

struct DirectionWeights {
  Tensor w_ih, w_hh, b_ih, b_hh;
};

struct DirectionResult {
  Tensor ys, h, c;  // ys [T, B, H]; the state after the last step
};

// x W_ihᵀ + b_ih for every step of x [T, B, I], one product: [T, B, G].
// A batch-first input (`batch_major`, [B, T, I], the first layer's) is
// projected in its own layout and the product transposed: the graph then
// reads linear(embedding(ids)) as written, which the compiler folds into
// projecting the embedding table once (peephole: linear_of_embedding).
Tensor input_projection(const Tensor& x, const Tensor& batch_major, const DirectionWeights& w) {
  if (batch_major.defined()) return transpose(linear(batch_major, w.w_ih, w.b_ih), 0, 1);
  return linear(x, w.w_ih, w.b_ih);
}

// One direction of one layer over the input projection gi [T, B, G]: one
// scan, whose step is h W_hhᵀ + b_hh and the cell's pointwise op. The
// reverse direction scans from the last step to the first and stacks its
// outputs in time order.
//
// With `live` ([T, B, 1] bool: sequence b has not ended at step t) the
// scan also reads the step's mask: where it is false the carried state
// passes through unchanged and the output is zero. A sequence's final
// state is then its state at its own last step, and the reverse direction
// starts each sequence at its own last step from h0. Without a mask the
// step is the plain one (no select per step).
DirectionResult run_direction(RNNMode mode, const Tensor& gi, const Tensor& h0, const Tensor& c0,
                              const DirectionWeights& w, bool reverse, const Tensor& live) {
  Tensors init{h0};
  if (mode == RNNMode::LSTM) init.push_back(c0);
  Tensors scanned{gi};
  if (live.defined()) scanned.push_back(live);
  ScanResult r = scan(
      [&](const Tensors& carry, const Tensors& xs) {
        Tensors next =
            step(mode, xs[0], carry[0], carry.size() > 1 ? carry[1] : Tensor(), w.w_hh, w.b_hh);
        if (xs.size() == 1) {
          Tensors ys{next[0]};
          return std::pair<Tensors, Tensors>(std::move(next), std::move(ys));
        }
        const Tensor& step_live = xs[1];
        Tensors ys{where(step_live, next[0], 0.0)};
        for (size_t i = 0; i < next.size(); ++i)
          next[i] = where(step_live, next[i], carry[i]);
        return std::pair<Tensors, Tensors>(std::move(next), std::move(ys));
      },
      init, scanned, reverse);
  return {r.ys[0], r.carry[0], mode == RNNMode::LSTM ? r.carry[1] : Tensor()};
}

// h0 or c0 as given ([L * D, B, H] after unsqueezing an unbatched one),
// checked against the size PyTorch expects.
Tensor initial_state(const Tensor& given, bool unbatched, const char* what,
                     const IntList& expected) {
  if (!given.defined()) return given;
  Tensor state = unbatched ? unsqueeze(given, 1) : given;
  KILN_CHECK(state.shape() == expected, "Expected ", what, " size (", expected[0], ", ",
             expected[1], ", ", expected[2], "), got ", state.shape());
  return state;
}

// [T, B, 1] bool, true where step t is within sequence b's length, from
// lengths (int64 [B]): one comparison, so a trace keeps it a graph value.
Tensor live_mask(const Tensor& lengths, int64_t steps, int64_t batch, bool unbatched) {
  KILN_CHECK(!unbatched, "RNN: sequence lengths need a batched (3-D) input");
  KILN_CHECK(lengths.dim() == 1 && lengths.shape()[0] == batch, "RNN: expected lengths of shape [",
             batch, "], got ", lengths.shape());
  KILN_CHECK_TYPE(!is_floating(lengths.dtype()) && lengths.dtype() != DType::Bool,
                  "RNN: lengths must be integers, got ", to_string(lengths.dtype()));
  const Tensor step_index = reshape(arange(int64_t(0), steps), IntList{steps, 1});
  return unsqueeze(lt(step_index, unsqueeze(to(lengths, DType::Int64), 0)), 2);
}

}  // namespace

RNNResult recurrent(RNNMode mode, const Tensor& input, const Tensor& h0, const Tensor& c0,
                    const std::vector<Tensor>& weights, const RNNOptions& options) {
  return recurrent_masked(mode, input, Tensor(), h0, c0, weights, options);
}

RNNResult recurrent_masked(RNNMode mode, const Tensor& input, const Tensor& lengths,
                           const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights,
                           const RNNOptions& options) {
  const char* name = layer_name(mode);
  const bool lstm = mode == RNNMode::LSTM;
  KILN_CHECK_VALUE(input.defined() && (input.dim() == 2 || input.dim() == 3), name,
                   ": Expected input to be 2D or 3D, got ", input.defined() ? input.dim() : 0,
                   "D instead");
  KILN_CHECK_VALUE(options.num_layers >= 1, name, ": num_layers must be at least 1, got ",
                   options.num_layers);
  const int64_t directions = options.bidirectional ? 2 : 1;
  const size_t per_direction = options.bias ? 4 : 2;
  const size_t expected_weights = size_t(options.num_layers * directions) * per_direction;
  KILN_CHECK_VALUE(weights.size() == expected_weights, name, ": expected ", expected_weights,
                   " weights (", options.num_layers, " layers, ", directions, " directions, ",
                   per_direction, " each), got ", weights.size());
  for (const Tensor& w : weights)
    KILN_CHECK_VALUE(w.defined(), name, ": a weight is undefined");
  KILN_CHECK_VALUE(!lstm || h0.defined() == c0.defined(), name,
                   ": give both h0 and c0, or neither");

  const bool unbatched = input.dim() == 2;
  if (unbatched) {
    const bool ok = (!h0.defined() || h0.dim() == 2) && (!c0.defined() || c0.dim() == 2);
    KILN_CHECK(ok, "For unbatched 2-D input, hx should also be 2-D but got ",
               h0.defined() ? h0.dim() : 2, "-D tensor");
  } else {
    const bool ok = (!h0.defined() || h0.dim() == 3) && (!c0.defined() || c0.dim() == 3);
    KILN_CHECK(ok, "For batched 3-D input, hx should also be 3-D but got ",
               h0.defined() ? h0.dim() : 3, "-D tensor");
  }
  // Time-major [T, B, I] from here on.
  Tensor x = unbatched ? unsqueeze(input, 1) : options.batch_first ? transpose(input, 0, 1) : input;
  const int64_t steps = x.shape()[0], batch = x.shape()[1];
  KILN_CHECK(steps > 0, "Expected sequence length to be larger than 0 in RNN");
  const int64_t input_size = weights[0].dim() == 2 ? weights[0].shape()[1] : -1;
  KILN_CHECK(x.shape()[2] == input_size, "input.size(-1) must be equal to input_size. Expected ",
             input_size, ", got ", x.shape()[2]);
  KILN_CHECK_VALUE(weights[1].dim() == 2, name, ": expected w_hh of 2 dims, got shape ",
                   weights[1].shape());
  const int64_t hidden = weights[1].shape()[1];

  const Tensor live = lengths.defined() ? live_mask(lengths, steps, batch, unbatched) : Tensor();

  const IntList state_shape{options.num_layers * directions, batch, hidden};
  Tensor h_init = initial_state(h0, unbatched, lstm ? "hidden[0]" : "hidden", state_shape);
  Tensor c_init = lstm ? initial_state(c0, unbatched, "hidden[1]", state_shape) : Tensor();
  // Without initial states every direction starts from zeros: one tensor
  // for h and another for c, as a recording tells loop-carried values
  // apart by their tensors.
  Tensor zero_h, zero_c;
  if (!h_init.defined()) {
    zero_h = zero_state(x, 1, hidden, input.dtype());
    if (lstm) zero_c = zero_state(x, 1, hidden, input.dtype());
  }
  auto state_at = [&](const Tensor& init, int64_t index, const Tensor& zero) {
    return init.defined() ? select(init, 0, index) : zero;
  };

  std::vector<Tensor> h_n, c_n;
  for (int64_t layer = 0; layer < options.num_layers; ++layer) {
    std::vector<Tensor> outputs;
    for (int64_t d = 0; d < directions; ++d) {
      const int64_t index = layer * directions + d;
      const Tensor* w = weights.data() + size_t(index) * per_direction;
      DirectionWeights dw{w[0], w[1], options.bias ? w[2] : Tensor(),
                          options.bias ? w[3] : Tensor()};
      const bool first_batch_first = layer == 0 && options.batch_first && !unbatched;
      Tensor gi = input_projection(x, first_batch_first ? input : Tensor(), dw);
      DirectionResult r =
          run_direction(mode, gi, state_at(h_init, index, zero_h),
                        lstm ? state_at(c_init, index, zero_c) : Tensor(), dw, d == 1, live);
      outputs.push_back(r.ys);
      h_n.push_back(r.h);
      if (lstm) c_n.push_back(r.c);
    }
    x = directions == 1 ? outputs[0] : cat(outputs, 2);
    if (layer + 1 < options.num_layers && options.training && options.dropout > 0)
      x = dropout(x, options.dropout, true);
  }

  RNNResult result;
  result.output = unbatched ? squeeze(x, 1) : options.batch_first ? transpose(x, 0, 1) : x;
  result.h_n = stack(h_n, 0);
  if (lstm) result.c_n = stack(c_n, 0);
  if (unbatched) {
    result.h_n = squeeze(result.h_n, 1);
    if (lstm) result.c_n = squeeze(result.c_n, 1);
  }
  return result;
}

RNNResult rnn(const Tensor& input, const Tensor& h0, const std::vector<Tensor>& weights,
              const RNNOptions& options, const std::string& nonlinearity) {
  return recurrent(rnn_nonlinearity_mode(nonlinearity), input, h0, {}, weights, options);
}

}  // namespace kiln::nn::functional
