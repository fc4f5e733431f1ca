"""Rows for the fused pointwise steps of the recurrent cells, against
PyTorch computing the same step op by op (as torch.nn.LSTMCell and GRUCell
do on the CPU after their two matrix products)."""
import numpy as np
import torch

from oracle import Case, ints, randn, values


def lstm_step(gi, gh, c):
    i, f, g, o = (gi + gh).chunk(4, 1)
    c_next = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c_next), c_next


def gru_step(gi, gh, h):
    i_r, i_z, i_n = gi.chunk(3, 1)
    h_r, h_z, h_n = gh.chunk(3, 1)
    r = torch.sigmoid(i_r + h_r)
    z = torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    return (h - n) * z + n


def lstm(batch, hidden, dtype="float32", layout="contiguous"):
    return [randn(batch, 4 * hidden, dtype=dtype, layout=layout),
            randn(batch, 4 * hidden, dtype=dtype), randn(batch, hidden, dtype=dtype)]


def gru(batch, hidden, dtype="float32", layout="contiguous"):
    return [randn(batch, 3 * hidden, dtype=dtype, layout=layout),
            randn(batch, 3 * hidden, dtype=dtype), randn(batch, hidden, dtype=dtype)]


LSTM = [
    Case("lstm_cell_pointwise", lstm(3, 5), lstm_step),
    Case("lstm_cell_pointwise", lstm(1, 67), lstm_step, name="batch1_odd_hidden"),
    Case("lstm_cell_pointwise", lstm(4, 6, "float64"), lstm_step, name="f64"),
    Case("lstm_cell_pointwise", lstm(5, 3, layout="transposed"), lstm_step,
         name="transposed_gates"),
    Case("lstm_cell_pointwise", lstm(4, 2, layout="expanded"), lstm_step, name="expanded_gates"),
    # Enough work to split the rows across threads.
    Case("lstm_cell_pointwise", lstm(32, 256), lstm_step, name="threaded_rows"),
    Case("lstm_cell_pointwise", lstm(0, 4), lstm_step, name="empty_batch"),
    Case("lstm_cell_pointwise", [randn(3, 12), randn(3, 12), randn(3, 4)], name="gate_width",
         error="lstm_cell_pointwise: expected gi and gh of shape [3, 16] (4 gates for the cell "
               "state of shape [3, 4]), got [3, 12] and [3, 12]"),
    Case("lstm_cell_pointwise", [randn(3, 8), randn(2, 8), randn(3, 2)], name="batch_mismatch",
         error="expected gi and gh of shape [3, 8]"),
    Case("lstm_cell_pointwise", [randn(3, 8), randn(3, 8, dtype="float64"), randn(3, 2)],
         name="dtype_mismatch",
         error="lstm_cell_pointwise: expected gh of dtype float32 (the cell state's), got float64"),
    Case("lstm_cell_pointwise", [randn(8), randn(8), randn(2)], name="one_dim_state",
         error="lstm_cell_pointwise: expected a cell state of 2 dims [batch, hidden], got [2]"),
    Case("lstm_cell_pointwise", [ints(0, 3, 2, 8), ints(0, 3, 2, 8), ints(0, 3, 2, 2)],
         name="int_inputs", error="lstm_cell_pointwise: expected a floating input, got int64"),
]

GRU = [
    Case("gru_cell_pointwise", gru(3, 5), gru_step),
    Case("gru_cell_pointwise", gru(1, 67), gru_step, name="batch1_odd_hidden"),
    Case("gru_cell_pointwise", gru(4, 6, "float64"), gru_step, name="f64"),
    Case("gru_cell_pointwise", gru(5, 3, layout="transposed"), gru_step, name="transposed_gates"),
    Case("gru_cell_pointwise", gru(32, 256), gru_step, name="threaded_rows"),
    Case("gru_cell_pointwise", gru(0, 4), gru_step, name="empty_batch"),
    Case("gru_cell_pointwise", [randn(3, 12), randn(3, 12), randn(3, 5)], name="gate_width",
         error="gru_cell_pointwise: expected gi and gh of shape [3, 15] (3 gates for the hidden "
               "state of shape [3, 5]), got [3, 12] and [3, 12]"),
    Case("gru_cell_pointwise", [randn(3, 6, dtype="float64"), randn(3, 6), randn(3, 2)],
         name="dtype_mismatch",
         error="gru_cell_pointwise: expected gi of dtype float32 (the hidden state's), got "
               "float64"),
]

# The backward ops get PyTorch's gradients of the steps above. Their inputs
# must agree with each other (c_new is the forward's result), so they are
# made here, from a fixed seed, rather than drawn per row.


def _arrays(seed, dtype, *shapes):
    rng = np.random.RandomState(seed)
    return [rng.standard_normal(shape).astype(dtype) for shape in shapes]


def lstm_backward_row(name, batch, hidden, dtype="float32", seed=0):
    gi, gh, c, dh, dc = _arrays(seed, dtype, (batch, 4 * hidden), (batch, 4 * hidden),
                                (batch, hidden), (batch, hidden), (batch, hidden))
    c_new = lstm_step(*map(torch.from_numpy, (gi, gh, c)))[1].numpy()

    def fn(gi, gh, c, c_new, dh, dc):
        gi, gh, c = (t.clone().requires_grad_() for t in (gi, gh, c))
        dgi, _, dc_prev = torch.autograd.grad(lstm_step(gi, gh, c), (gi, gh, c), (dh, dc))
        return dgi, dc_prev

    inputs = [values(a.tolist(), dtype, a.shape) for a in (gi, gh, c, c_new, dh, dc)]
    return Case("lstm_cell_pointwise_backward", inputs, fn, name=name, grad=False)


def gru_backward_row(name, batch, hidden, dtype="float32", seed=0):
    arrays = _arrays(seed, dtype, (batch, 3 * hidden), (batch, 3 * hidden), (batch, hidden),
                     (batch, hidden))

    def fn(gi, gh, h, dh):
        gi, gh, h = (t.clone().requires_grad_() for t in (gi, gh, h))
        return torch.autograd.grad(gru_step(gi, gh, h), (gi, gh, h), dh)

    inputs = [values(a.tolist(), dtype, a.shape) for a in arrays]
    return Case("gru_cell_pointwise_backward", inputs, fn, name=name, grad=False)


BACKWARD = [
    lstm_backward_row("", 3, 5),
    lstm_backward_row("batch1_odd_hidden", 1, 19, seed=1),
    lstm_backward_row("f64", 4, 3, "float64", seed=2),
    lstm_backward_row("empty_batch", 0, 4),
    Case("lstm_cell_pointwise_backward",
         [randn(3, 8), randn(3, 8), randn(3, 2), randn(3, 2), randn(3, 3), randn(3, 2)],
         name="grad_shape",
         error="lstm_cell_pointwise_backward: expected grad_h of dtype float32 and shape [3, 2] "
               "(the cell state's), got float32 [3, 3]"),
    gru_backward_row("", 3, 5),
    gru_backward_row("batch1_odd_hidden", 1, 19, seed=1),
    gru_backward_row("f64", 4, 3, "float64", seed=2),
    Case("gru_cell_pointwise_backward",
         [randn(3, 6), randn(3, 6), randn(3, 2), randn(3, 2, dtype="float64")],
         name="grad_dtype",
         error="gru_cell_pointwise_backward: expected grad_h of dtype float32 and shape [3, 2] "
               "(the hidden state's), got float64 [3, 2]"),
]

CASES = LSTM + GRU + BACKWARD
