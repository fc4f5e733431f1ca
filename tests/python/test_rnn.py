"""kiln.nn's RNN, LSTM, GRU and cells against torch.nn's: the same weights
in both, then outputs, final states and the gradients of the input, the
initial states and every parameter compared, over every argument
combination, in float32 and (tighter) float64. Then dropout, errors, and
the traced layers: eager-equal, and one loop per layer and direction."""
import itertools

import numpy as np
import pytest
import torch

import kiln
from kiln import nn

T, B, IN, H = 5, 3, 4, 6  # steps, batch, input size, hidden size

TOL = {"float32": dict(rtol=1e-4, atol=1e-5), "float64": dict(rtol=1e-9, atol=1e-11)}
DTYPES = {"float32": (kiln.float32, torch.float32, np.float32),
          "float64": (kiln.float64, torch.float64, np.float64)}


def _pair(kind, dtype, **kwargs):
    """A kiln and a torch module of one kind, holding the same weights."""
    kdtype, tdtype, _ = DTYPES[dtype]
    tmod = getattr(torch.nn, kind)(**kwargs).to(tdtype)
    kmod = getattr(nn, kind)(**kwargs, dtype=kdtype)
    kmod.load_state_dict({k: v.detach().numpy().copy() for k, v in tmod.state_dict().items()})
    return kmod, tmod


def _tensors(shape, dtype, seed):
    array = np.random.default_rng(seed).standard_normal(shape).astype(DTYPES[dtype][2])
    return (kiln.tensor(array).requires_grad_(), torch.tensor(array, requires_grad=True))


def _flatten(out):
    """(output, h_n) / (output, (h_n, c_n)) / (h, c) / h as a flat list."""
    if not isinstance(out, tuple):
        return [out]
    flat = []
    for item in out:
        flat.extend(_flatten(item))
    return flat


def _check(kmod, tmod, kx, tx, kstates, tstates, dtype, pack):
    """Forward both, compare every result; backward both with the same
    random upstream gradients, compare the gradients of the input, the
    states and the parameters (by name)."""
    kout = _flatten(kmod(kx, pack(kstates)))
    tout = _flatten(tmod(tx, pack(tstates)))
    assert len(kout) == len(tout)
    for k, t in zip(kout, tout):
        assert tuple(k.shape) == tuple(t.shape)
        np.testing.assert_allclose(k.detach().numpy(), t.detach().numpy(), **TOL[dtype])
    rng = np.random.default_rng(7)
    seeds = [rng.standard_normal(tuple(t.shape)).astype(DTYPES[dtype][2]) for t in tout]
    knames, kparams = zip(*kmod.named_parameters())
    tnames, tparams = zip(*tmod.named_parameters())
    assert knames == tnames
    kgrads = kiln.autograd.grad(kout, [kx, *kstates, *kparams], [kiln.tensor(s) for s in seeds],
                                allow_unused=True)
    tgrads = torch.autograd.grad(tout, [tx, *tstates, *tparams], [torch.tensor(s) for s in seeds],
                                 allow_unused=True)
    names = ["input"] + [f"state {i}" for i in range(len(kstates))] + list(knames)
    for name, kg, tg in zip(names, kgrads, tgrads):
        want = np.zeros(1) if tg is None else tg.numpy()
        got = np.zeros(1) if kg is None else kg.numpy()
        if tg is None or kg is None:  # unused on one side: the other's must be zero
            assert np.all(got == 0) and np.all(want == 0), name
            continue
        np.testing.assert_allclose(got, want, err_msg=name, **TOL[dtype])


LAYER_CASES = [
    (kind, layers, bias, batch_first, bidirectional, state, unbatched)
    for kind, layers, bias, batch_first, bidirectional, state, unbatched in itertools.product(
        ["RNN_TANH", "RNN_RELU", "LSTM", "GRU"], [1, 2], [True, False], [False, True],
        [False, True], [False, True], [False, True])
    if not (unbatched and batch_first)  # batch_first means nothing without a batch
]


def _case_id(case):
    kind, layers, bias, batch_first, bidirectional, state, unbatched = case
    return "-".join([kind, f"L{layers}", "bias" if bias else "nobias",
                     "bf" if batch_first else "tf", "bi" if bidirectional else "uni",
                     "h0" if state else "noh0", "unbatched" if unbatched else "batched"])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", LAYER_CASES, ids=[_case_id(c) for c in LAYER_CASES])
def test_layer_matches_torch(case, dtype):
    kind, layers, bias, batch_first, bidirectional, state, unbatched = case
    kwargs = dict(input_size=IN, hidden_size=H, num_layers=layers, bias=bias,
                  batch_first=batch_first, bidirectional=bidirectional)
    module = "RNN" if kind.startswith("RNN") else kind
    if module == "RNN":
        kwargs["nonlinearity"] = "relu" if kind == "RNN_RELU" else "tanh"
    torch.manual_seed(0)
    kmod, tmod = _pair(module, dtype, **kwargs)
    shape = (T, IN) if unbatched else (B, T, IN) if batch_first else (T, B, IN)
    kx, tx = _tensors(shape, dtype, 1)
    kstates, tstates = [], []
    if state:
        state_shape = (layers * (2 if bidirectional else 1),) + (() if unbatched else (B,)) + (H,)
        for seed in range(2 if module == "LSTM" else 1):
            k, t = _tensors(state_shape, dtype, 10 + seed)
            kstates.append(k)
            tstates.append(t)

    def pack(states):
        if not states:
            return None
        return tuple(states) if module == "LSTM" else states[0]

    _check(kmod, tmod, kx, tx, kstates, tstates, dtype, pack)


CELL_CASES = list(itertools.product(["RNNCell-tanh", "RNNCell-relu", "LSTMCell", "GRUCell"],
                                    [True, False], [True, False], [True, False]))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind,bias,state,unbatched", CELL_CASES,
                         ids=["-".join([c[0], "bias" if c[1] else "nobias",
                                        "h0" if c[2] else "noh0",
                                        "unbatched" if c[3] else "batched"]) for c in CELL_CASES])
def test_cell_matches_torch(kind, bias, state, unbatched, dtype):
    module, _, nonlinearity = kind.partition("-")
    kwargs = dict(input_size=IN, hidden_size=H, bias=bias)
    if nonlinearity:
        kwargs["nonlinearity"] = nonlinearity
    kmod, tmod = _pair(module, dtype, **kwargs)
    kx, tx = _tensors((IN,) if unbatched else (B, IN), dtype, 2)
    kstates, tstates = [], []
    if state:
        for seed in range(2 if module == "LSTMCell" else 1):
            k, t = _tensors((H,) if unbatched else (B, H), dtype, 20 + seed)
            kstates.append(k)
            tstates.append(t)

    def pack(states):
        if not states:
            return None
        return tuple(states) if module == "LSTMCell" else states[0]

    _check(kmod, tmod, kx, tx, kstates, tstates, dtype, pack)


def test_parameters_names_shapes_and_init_as_torch():
    kmod = nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    tmod = torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    kparams, tparams = dict(kmod.named_parameters()), dict(tmod.named_parameters())
    assert list(kparams) == list(tparams)
    for name, p in kparams.items():
        assert tuple(p.shape) == tuple(tparams[name].shape), name
        assert p.requires_grad
        assert np.abs(p.detach().numpy()).max() <= 0.5  # U(±1/sqrt(4))
    assert list(kmod.state_dict()) == list(tmod.state_dict())
    cell = nn.GRUCell(5, 2, bias=False)
    assert [n for n, _ in cell.named_parameters()] == ["weight_ih", "weight_hh"]
    assert cell.bias_ih is None
    assert repr(nn.RNN(3, 4, 2, nonlinearity="relu", batch_first=True, dropout=0.5)) == \
        repr(torch.nn.RNN(3, 4, 2, nonlinearity="relu", batch_first=True, dropout=0.5))
    assert repr(nn.RNNCell(3, 4, bias=False, nonlinearity="relu")) == \
        repr(torch.nn.RNNCell(3, 4, bias=False, nonlinearity="relu"))


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_dropout_between_layers(kind):
    kiln.manual_seed(0)
    kmod = getattr(nn, kind)(IN, H, num_layers=3, dropout=0.4, bidirectional=True)
    plain = getattr(nn, kind)(IN, H, num_layers=3, bidirectional=True)
    plain.load_state_dict(kmod.state_dict())
    x = kiln.randn(T, B, IN)
    a = _flatten(kmod(x))
    b = _flatten(kmod(x))
    assert tuple(a[0].shape) == (T, B, 2 * H) and tuple(a[1].shape) == (6, B, H)
    assert not np.array_equal(a[0].detach().numpy(), b[0].detach().numpy())  # a new mask per call
    kmod.eval()
    plain.eval()
    for got, want in zip(_flatten(kmod(x)), _flatten(plain(x))):
        np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    # dropout=0 while training equals eval.
    plain.train()
    for got, want in zip(_flatten(plain(x)), _flatten(kmod(x))):
        np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())


def test_bad_arguments_and_inputs():
    with pytest.raises(NotImplementedError, match="proj_size=2 is not supported"):
        nn.LSTM(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="Unknown nonlinearity 'gelu'"):
        nn.RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match="dropout should be a number in range"):
        nn.GRU(3, 4, dropout=1.5)
    with pytest.raises(ValueError, match="hidden_size must be greater than zero"):
        nn.LSTMCell(3, 0)
    lstm = nn.LSTM(3, 4)
    with pytest.raises(ValueError, match="LSTM: Expected input to be 2D or 3D, got 4D instead"):
        lstm(kiln.randn(2, 3, 4, 5))
    with pytest.raises(RuntimeError, match=r"input.size\(-1\) must be equal to input_size"):
        lstm(kiln.randn(5, 2, 6))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(1, 2, 4\), got"):
        lstm(kiln.randn(5, 2, 3), (kiln.randn(2, 2, 4), kiln.randn(1, 2, 4)))
    with pytest.raises(ValueError, match="GRUCell: Expected input to be 1D or 2D"):
        nn.GRUCell(3, 4)(kiln.randn(2, 2, 3))


def _loops(graph):
    return [n.op for n in graph.nodes if n.op in ("scan", "while_loop", "fori_loop")]


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_traced_equals_eager_and_is_one_loop_per_layer(kind):
    """SCENARIOS.md §10: kiln.jit.trace(rnn, (x,)) is one scan per layer
    (and direction), not seq_len copies of the cell."""
    kiln.manual_seed(1)
    rnn = getattr(nn, kind)(IN, H, num_layers=2, batch_first=True, bidirectional=True).eval()
    x = kiln.randn(B, T, IN)
    traced = kiln.jit.trace(rnn, (x,))
    for sample in (x, kiln.randn(B, T, IN)):
        for got, want in zip(_flatten(traced(sample)), _flatten(rnn(sample))):
            np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6,
                                       atol=1e-6)
    graph = traced.graph
    assert _loops(graph) == ["scan"] * 4, str(graph)
    cell_ops = {"lstm_cell_pointwise", "gru_cell_pointwise"}
    assert not [n for n in graph.nodes if n.op in cell_ops], "the cell is unrolled"


def test_hybridized_lstm_trains_as_eager():
    """A compiled training step through the LSTM gives eager's gradients."""
    kiln.manual_seed(2)
    model = nn.LSTM(IN, H, num_layers=2)
    x = kiln.randn(T, B, IN)
    out, (h, c) = model(x)
    (out.sum() + h.sum() + c.sum()).backward()
    want = {n: p.grad.numpy().copy() for n, p in model.named_parameters()}
    model.zero_grad()
    model.hybridize()
    out, (h, c) = model(x)
    (out.sum() + h.sum() + c.sum()).backward()
    for name, p in model.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), want[name], rtol=1e-5, atol=1e-6,
                                   err_msg=name)


@pytest.mark.parametrize("kind", ["LSTMCell", "GRUCell"])
def test_double_backward_matches_torch(kind):
    """Gradients of gradients: while a backward is recorded (create_graph)
    the fused cells' rules are written in kiln ops, so they differentiate."""
    kmod, tmod = _pair(kind, "float64", input_size=IN, hidden_size=H)
    kx, tx = _tensors((B, IN), "float64", 3)
    states = [_tensors((B, H), "float64", 30 + i) for i in range(2 if kind == "LSTMCell" else 1)]
    khx = tuple(k for k, _ in states) if kind == "LSTMCell" else states[0][0]
    thx = tuple(t for _, t in states) if kind == "LSTMCell" else states[0][1]
    kout, tout = _flatten(kmod(kx, khx)), _flatten(tmod(tx, thx))
    kleaves = [kx, kmod.weight_hh]
    tleaves = [tx, tmod.weight_hh]
    kg = kiln.autograd.grad([o.sum() for o in kout], kleaves, create_graph=True)
    tg = torch.autograd.grad([o.sum() for o in tout], tleaves, create_graph=True)
    for k, t in zip(kg, tg):
        np.testing.assert_allclose(k.detach().numpy(), t.detach().numpy(), **TOL["float64"])
    k2 = kiln.autograd.grad([(g * g).sum() for g in kg], [kx, kmod.weight_ih, kmod.weight_hh])
    t2 = torch.autograd.grad([(g * g).sum() for g in tg], [tx, tmod.weight_ih, tmod.weight_hh])
    for name, k, t in zip(["input", "weight_ih", "weight_hh"], k2, t2):
        np.testing.assert_allclose(k.numpy(), t.numpy(), err_msg=name, **TOL["float64"])


@pytest.mark.parametrize("hidden", [13, 256])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_traced_lstm_at_batch_one_matches_torch(hidden, bias, bidirectional, monkeypatch):
    """At batch 1 a traced LSTM's scans run the fused recurrent kernel
    (kiln/jit/exec/lstm_scan.h): hidden 13 leaves a partial block of units
    (KILN_UNROLL=0 keeps its small scans loops), 256 (W4's layer) splits the
    blocks between threads when there are two. Outputs and final states
    against torch's, with initial states given, then again after the
    weights change (the packed W_hh is redone)."""
    monkeypatch.setenv("KILN_UNROLL", "0")
    kmod, tmod = _pair("LSTM", "float32", input_size=IN, hidden_size=hidden, num_layers=2,
                       bias=bias, batch_first=True, bidirectional=bidirectional)
    kmod.eval()
    directions = 2 if bidirectional else 1
    kx, tx = _tensors((1, T, IN), "float32", 11)
    states = [_tensors((2 * directions, 1, hidden), "float32", 12 + i) for i in range(2)]
    kstates, tstates = tuple(k.detach() for k, _ in states), tuple(t.detach() for _, t in states)
    with kiln.no_grad():
        traced = kiln.jit.trace(kmod, (kx.detach(), kstates))
    for round_ in range(2):
        with kiln.no_grad():
            got = _flatten(traced(kx.detach(), kstates))
        with torch.no_grad():
            want = _flatten(tmod(tx.detach(), tstates))
        for k, t in zip(got, want):
            np.testing.assert_allclose(k.numpy(), t.numpy(), rtol=1e-4, atol=1e-5,
                                       err_msg=f"round {round_}")
        with kiln.no_grad(), torch.no_grad():
            for (_, kp), (_, tp) in zip(kmod.named_parameters(), tmod.named_parameters()):
                kp.mul_(0.5)
                tp.mul_(0.5)
