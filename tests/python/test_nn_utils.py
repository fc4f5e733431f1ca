"""kiln.nn.utils against torch.nn.utils: gradient clipping by norm (every
norm type, some parameters without a gradient, non-finite norms) and by
value, parameters to a vector and back, padded and packed sequences (round
trips, both orders, gradients through them), the recurrent layers on packed
input (outputs, final states and every gradient), clipping inside a compiled
training step, and a char-level LSTM on variable-length sequences trained
with clipping, step for step against torch."""
import itertools
import math

import numpy as np
import pytest
import torch

import kiln
from kiln import nn, optim
from kiln.nn.utils import rnn as R

TRNN = torch.nn.utils.rnn
TOL = dict(rtol=1e-5, atol=1e-6)
TOL64 = dict(rtol=1e-9, atol=1e-11)


def np_of(t):
    return t.detach().numpy()


def pair(array, requires_grad=False):
    """The same values as a kiln and a torch tensor."""
    array = np.asarray(array)
    return (kiln.tensor(array.copy(), requires_grad=requires_grad),
            torch.tensor(array.copy(), requires_grad=requires_grad))


# ---- clipping ---------------------------------------------------------------

SHAPES = [(4, 3), (3,), (2, 2, 2), (5,)]


def params_with_grads(scale=1.0, missing=(1,), seed=0):
    """Parameters of SHAPES in kiln and torch, with equal .grad except at the
    indices in `missing` (no gradient)."""
    rng = np.random.default_rng(seed)
    kps, tps = [], []
    for i, shape in enumerate(SHAPES):
        kp, tp = pair(rng.standard_normal(shape).astype(np.float32), requires_grad=True)
        if i not in missing:
            g = (rng.standard_normal(shape) * scale).astype(np.float32)
            kp.grad, tp.grad = kiln.tensor(g.copy()), torch.tensor(g.copy())
        kps.append(kp)
        tps.append(tp)
    return kps, tps


def assert_same_grads(kps, tps, tol=TOL):
    for kp, tp in zip(kps, tps):
        if tp.grad is None:
            assert kp.grad is None
            continue
        np.testing.assert_allclose(np_of(kp.grad), tp.grad.numpy(), **tol)


@pytest.mark.parametrize("norm_type", [1, 2, 2.0, math.inf, "inf", 0.5, 3, 0, -math.inf])
@pytest.mark.parametrize("max_norm", [0.1, 1e3])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    kps, tps = params_with_grads()
    knorm = nn.utils.clip_grad_norm_(iter(kps), max_norm, norm_type=norm_type)
    tnorm = torch.nn.utils.clip_grad_norm_(iter(tps), max_norm, norm_type=norm_type)
    assert knorm.dim() == 0
    np.testing.assert_allclose(np_of(knorm), tnorm.numpy(), **TOL)
    assert_same_grads(kps, tps)


def test_clip_grad_norm_of_one_tensor_and_of_nothing():
    kps, tps = params_with_grads(missing=())
    knorm = nn.utils.clip_grad_norm_(kps[0], 0.5)
    tnorm = torch.nn.utils.clip_grad_norm_(tps[0], 0.5)
    np.testing.assert_allclose(np_of(knorm), tnorm.numpy(), **TOL)
    assert_same_grads(kps, tps)
    with pytest.warns(UserWarning, match="empty generator"):
        norm = nn.utils.clip_grad_norm_((p for p in []), 1.0)
    assert norm.item() == 0.0 and norm.dtype == kiln.float32
    kps, _ = params_with_grads(missing=(0, 1, 2, 3))
    assert nn.utils.clip_grad_norm_(kps, 1.0).item() == 0.0


def test_clip_grad_norm_with_a_float64_gradient_stacks_in_float64():
    kps, tps = params_with_grads(missing=())
    g = np.random.default_rng(3).standard_normal((3,))
    kp, tp = pair(np.zeros(3), requires_grad=True)
    kp.grad, tp.grad = kiln.tensor(g.copy()), torch.tensor(g.copy())
    knorm = nn.utils.clip_grad_norm_(kps + [kp], 0.5)
    tnorm = torch.nn.utils.clip_grad_norm_(tps + [tp], 0.5)
    assert knorm.dtype == kiln.float64 and tnorm.dtype == torch.float64
    np.testing.assert_allclose(np_of(knorm), tnorm.numpy(), **TOL)
    assert_same_grads(kps + [kp], tps + [tp])


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_non_finite_norm_raises_only_when_asked(bad):
    kps, tps = params_with_grads()
    kps[0].grad[0, 0] = bad
    tps[0].grad[0, 0] = bad
    with pytest.raises(RuntimeError, match="total norm of order 2.0 for gradients from "
                       "`parameters` is non-finite"):
        nn.utils.clip_grad_norm_(kps, 1.0, error_if_nonfinite=True)
    with pytest.raises(RuntimeError, match="non-finite"):
        torch.nn.utils.clip_grad_norm_(tps, 1.0, error_if_nonfinite=True)
    knorm = nn.utils.clip_grad_norm_(kps, 1.0)
    tnorm = torch.nn.utils.clip_grad_norm_(tps, 1.0)
    np.testing.assert_array_equal(np_of(knorm), tnorm.numpy())
    assert_same_grads(kps, tps)  # nan where torch has nan (assert_allclose matches nans)


def test_get_total_norm_and_clip_grads_with_norm_match_torch():
    kps, tps = params_with_grads()
    kgrads = [p.grad for p in kps if p.grad is not None]
    tgrads = [p.grad for p in tps if p.grad is not None]
    for norm_type in (2.0, 1.0, math.inf):
        np.testing.assert_allclose(np_of(nn.utils.get_total_norm(kgrads, norm_type)),
                                   torch.nn.utils.get_total_norm(tgrads, norm_type).numpy(),
                                   **TOL)
    total = nn.utils.get_total_norm(kgrads)
    nn.utils.clip_grads_with_norm_(kps, 0.3, total)
    torch.nn.utils.clip_grads_with_norm_(tps, 0.3, torch.nn.utils.get_total_norm(tgrads))
    assert_same_grads(kps, tps)


def test_clip_grad_value_matches_torch():
    kps, tps = params_with_grads(scale=2.0)
    nn.utils.clip_grad_value_(kps, 0.7)
    torch.nn.utils.clip_grad_value_(tps, 0.7)
    assert_same_grads(kps, tps, dict(rtol=0, atol=0))
    assert max(np.abs(np_of(p.grad)).max() for p in kps if p.grad is not None) <= 0.7


def test_clipping_records_no_history():
    kps, _ = params_with_grads(missing=())
    for p in kps:
        p.grad.requires_grad_()
    norm = nn.utils.clip_grad_norm_(kps, 0.1)
    assert not norm.requires_grad


def test_parameters_to_vector_and_back():
    kmod = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    tmod = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    kmod.load_state_dict({k: v.detach().numpy() for k, v in tmod.state_dict().items()})
    kvec = nn.utils.parameters_to_vector(kmod.parameters())
    tvec = torch.nn.utils.parameters_to_vector(tmod.parameters())
    np.testing.assert_array_equal(np_of(kvec), np_of(tvec))
    kvec.sum().backward()  # differentiable, as torch.cat is
    assert all(np.all(np_of(p.grad) == 1) for p in kmod.parameters())

    new = np.random.default_rng(1).standard_normal(tvec.shape[0]).astype(np.float32)
    nn.utils.vector_to_parameters(kiln.tensor(new), kmod.parameters())
    torch.nn.utils.vector_to_parameters(torch.tensor(new), tmod.parameters())
    for (name, kp), (_, tp) in zip(kmod.named_parameters(), tmod.named_parameters()):
        np.testing.assert_array_equal(np_of(kp), np_of(tp), err_msg=name)
        assert kp.requires_grad
    np.testing.assert_array_equal(np_of(nn.utils.parameters_to_vector(kmod.parameters())), new)
    with pytest.raises(TypeError, match="expected kiln.Tensor"):
        nn.utils.vector_to_parameters(new, kmod.parameters())
    with pytest.raises(RuntimeError, match="elements but the parameters hold"):
        nn.utils.vector_to_parameters(kiln.tensor(new[:-1]), kmod.parameters())


def test_clipping_inside_a_compiled_training_step_equals_eager():
    def train(compiled):
        kiln.manual_seed(0)
        model = nn.Sequential(nn.Linear(10, 8), nn.ReLU(), nn.Linear(8, 3))
        opt = optim.SGD(model.parameters(), lr=0.5, momentum=0.9)

        def step(x, target):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), target)
            loss.backward()
            norm = nn.utils.clip_grad_norm_(model.parameters(), 0.25)
            nn.utils.clip_grad_value_(model.parameters(), 0.05)
            opt.step()
            return loss, norm

        run = kiln.compile(step) if compiled else step
        kiln.manual_seed(1)
        out = [run(kiln.randn(16, 10), kiln.randint(0, 3, (16,))) for _ in range(5)]
        return model, [(loss.item(), norm.item()) for loss, norm in out], run

    eager_model, eager_values, _ = train(False)
    model, values, run = train(True)
    assert run.cache_info().hits == 4  # one recording, then the compiled plan
    assert any(norm > 0.25 for _, norm in values)  # the clip did bite
    np.testing.assert_allclose(values, eager_values, rtol=1e-5, atol=1e-6)
    for kp, ep in zip(model.parameters(), eager_model.parameters()):
        np.testing.assert_allclose(np_of(kp), np_of(ep), rtol=1e-5, atol=1e-6)


# ---- padded and packed sequences -------------------------------------------

def sequences(lengths, trailing=(3,), dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal((n, *trailing)).astype(dtype) for n in lengths]
    return ([kiln.tensor(a, requires_grad=True) for a in arrays],
            [torch.tensor(a, requires_grad=True) for a in arrays])


@pytest.mark.parametrize("batch_first,padding_value,side",
                         list(itertools.product([False, True], [0.0, -2.5], ["right", "left"])))
def test_pad_sequence_matches_torch(batch_first, padding_value, side):
    ks, ts = sequences([3, 5, 1], trailing=(2, 2))
    kout = R.pad_sequence(ks, batch_first, padding_value, side)
    tout = TRNN.pad_sequence(ts, batch_first, padding_value, side)
    np.testing.assert_array_equal(np_of(kout), np_of(tout))
    weights = np.random.default_rng(2).standard_normal(tuple(tout.shape)).astype(np.float32)
    (kout * kiln.tensor(weights)).sum().backward()
    (tout * torch.tensor(weights)).sum().backward()
    for k, t in zip(ks, ts):
        np.testing.assert_allclose(np_of(k.grad), t.grad.numpy(), **TOL)


def test_pad_sequence_of_integers_and_its_errors():
    ks = [kiln.tensor([1, 2, 3]), kiln.tensor([4])]
    ts = [torch.tensor([1, 2, 3]), torch.tensor([4])]
    np.testing.assert_array_equal(np_of(R.pad_sequence(ks, padding_value=-1)),
                                  TRNN.pad_sequence(ts, padding_value=-1).numpy())
    with pytest.raises(RuntimeError, match="received an empty list of sequences"):
        R.pad_sequence([])
    with pytest.raises(RuntimeError, match="Expected padding_side to be one of left or right"):
        R.pad_sequence(ks, padding_side="up")
    with pytest.raises(RuntimeError, match="the dims past the first must agree"):
        R.pad_sequence([kiln.zeros(2, 3), kiln.zeros(2, 4)])


def packed_pair(lengths, batch_first, enforce_sorted, trailing=(3,), dtype=np.float32):
    """A padded batch holding sequences of `lengths` in kiln and torch, and
    each packed."""
    ks, ts = sequences(lengths, trailing, dtype)
    kx = R.pad_sequence([k.detach() for k in ks], batch_first).requires_grad_()
    tx = TRNN.pad_sequence([t.detach() for t in ts], batch_first).requires_grad_()
    kp = R.pack_padded_sequence(kx, kiln.tensor(lengths), batch_first, enforce_sorted)
    tp = TRNN.pack_padded_sequence(tx, torch.tensor(lengths), batch_first, enforce_sorted)
    return kx, tx, kp, tp


def assert_same_packed(kp, tp, tol=TOL):
    np.testing.assert_allclose(np_of(kp.data), np_of(tp.data), **tol)
    np.testing.assert_array_equal(kp.batch_sizes.numpy(), tp.batch_sizes.numpy())
    for k, t in ((kp.sorted_indices, tp.sorted_indices),
                 (kp.unsorted_indices, tp.unsorted_indices)):
        assert (k is None) == (t is None)
        if t is not None:
            np.testing.assert_array_equal(k.numpy(), t.numpy())


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("lengths,enforce_sorted", [([5, 3, 3, 1], True), ([2, 5, 1, 5, 3], False),
                                                    ([4], True), ([3, 3], False)])
def test_pack_and_pad_round_trip_as_torch(lengths, enforce_sorted, batch_first):
    kx, tx, kp, tp = packed_pair(lengths, batch_first, enforce_sorted)
    assert_same_packed(kp, tp)
    for total_length in (None, max(lengths) + 2):
        kpad, klen = R.pad_packed_sequence(kp, batch_first, -1.0, total_length)
        tpad, tlen = TRNN.pad_packed_sequence(tp, batch_first, -1.0, total_length)
        np.testing.assert_array_equal(np_of(kpad), np_of(tpad))
        np.testing.assert_array_equal(klen.numpy(), tlen.numpy())
    # Gradients flow back through pad(pack(x)) to the padded input.
    kpad, _ = R.pad_packed_sequence(kp, batch_first)
    tpad, _ = TRNN.pad_packed_sequence(tp, batch_first)
    weights = np.random.default_rng(5).standard_normal(tuple(tpad.shape)).astype(np.float32)
    (kpad * kiln.tensor(weights)).sum().backward()
    (tpad * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(np_of(kx.grad), tx.grad.numpy(), **TOL)


def test_pack_sequence_unpack_and_unpad():
    ks, ts = sequences([2, 4, 1, 4])
    kp, tp = R.pack_sequence(ks, enforce_sorted=False), TRNN.pack_sequence(ts, enforce_sorted=False)
    assert_same_packed(kp, tp)
    for k, t, original in zip(R.unpack_sequence(kp), TRNN.unpack_sequence(tp), ks):
        np.testing.assert_array_equal(np_of(k), np_of(t))
        np.testing.assert_array_equal(np_of(k), np_of(original))
    kpad, tpad = R.pad_sequence(ks, batch_first=True), TRNN.pad_sequence(ts, batch_first=True)
    lengths = [2, 4, 1, 4]
    for k, t in zip(R.unpad_sequence(kpad, kiln.tensor(lengths), batch_first=True),
                    TRNN.unpad_sequence(tpad, torch.tensor(lengths), batch_first=True)):
        np.testing.assert_array_equal(np_of(k), np_of(t))
    sorted_ks = sorted(ks, key=lambda s: -s.shape[0])
    sorted_ts = sorted(ts, key=lambda s: -s.shape[0])
    assert_same_packed(R.pack_sequence(sorted_ks), TRNN.pack_sequence(sorted_ts))


def test_packing_errors_read_as_torch():
    x = kiln.zeros(3, 2, 4)
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order"):
        R.pack_padded_sequence(x, [2, 3])
    with pytest.raises(RuntimeError, match="has to be greater than 0"):
        R.pack_padded_sequence(x, [2, 0])
    with pytest.raises(RuntimeError, match="equal to batch_size"):
        R.pack_padded_sequence(x, [2])
    with pytest.raises(RuntimeError, match="exceeds the input's 3 steps"):
        R.pack_padded_sequence(x, [4, 2])
    packed = R.pack_padded_sequence(x, [3, 2])
    with pytest.raises(ValueError, match="Expected total_length to be at least"):
        R.pad_packed_sequence(packed, total_length=2)


def test_packed_sequence_to_and_construction():
    kp = R.pack_sequence([kiln.ones(3, 2), kiln.ones(1, 2)], enforce_sorted=False)
    assert kp.to(kiln.float32) is kp
    double = kp.double()
    assert double.data.dtype == kiln.float64 and double.batch_sizes is kp.batch_sizes
    np.testing.assert_array_equal(double.sorted_indices.numpy(), kp.sorted_indices.numpy())
    data, batch_sizes, sorted_indices, unsorted_indices = kp  # a named tuple, as torch's
    rebuilt = R.PackedSequence(data, batch_sizes, sorted_indices)
    np.testing.assert_array_equal(rebuilt.unsorted_indices.numpy(), unsorted_indices.numpy())
    assert R.PackedSequence((data, batch_sizes)).sorted_indices is None


# ---- recurrent layers on packed input ---------------------------------------

IN, H = 3, 4


def layer_pair(kind, dtype, **kwargs):
    tmod = getattr(torch.nn, kind)(IN, H, **kwargs).to(dtype)
    kmod = getattr(nn, kind)(IN, H, **kwargs,
                             dtype=kiln.float64 if dtype == torch.float64 else kiln.float32)
    kmod.load_state_dict({k: v.detach().numpy().copy() for k, v in tmod.state_dict().items()})
    return kmod, tmod


def flat(out):
    if isinstance(out, (R.PackedSequence, TRNN.PackedSequence)):
        return [out.data]
    if isinstance(out, tuple):
        return [t for item in out for t in flat(item)]
    return [out]


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("num_layers,bidirectional", [(1, False), (2, False), (1, True),
                                                      (2, True)])
@pytest.mark.parametrize("enforce_sorted,with_state", [(True, False), (False, True)])
def test_recurrent_layers_on_packed_input_match_torch(kind, num_layers, bidirectional,
                                                      enforce_sorted, with_state):
    kmod, tmod = layer_pair(kind, torch.float64, num_layers=num_layers,
                            bidirectional=bidirectional)
    lengths = [5, 4, 4, 2, 1] if enforce_sorted else [2, 5, 1, 4, 4]
    kx, tx, kp, tp = packed_pair(lengths, False, enforce_sorted, trailing=(IN,),
                                 dtype=np.float64)
    kstates, tstates = [], []
    if with_state:
        rng = np.random.default_rng(11)
        shape = (num_layers * (2 if bidirectional else 1), len(lengths), H)
        for _ in range(2 if kind == "LSTM" else 1):
            k, t = pair(rng.standard_normal(shape), requires_grad=True)
            kstates.append(k)
            tstates.append(t)
    kargs = () if not with_state else (tuple(kstates) if kind == "LSTM" else kstates[0],)
    targs = () if not with_state else (tuple(tstates) if kind == "LSTM" else tstates[0],)
    kout, tout = kmod(kp, *kargs), tmod(tp, *targs)
    assert isinstance(kout[0], R.PackedSequence)
    assert_same_packed(kout[0], tout[0], TOL64)
    kflat, tflat = flat(kout), flat(tout)
    for k, t in zip(kflat, tflat):
        np.testing.assert_allclose(np_of(k), np_of(t), **TOL64)
    rng = np.random.default_rng(3)
    seeds = [rng.standard_normal(tuple(t.shape)) for t in tflat]
    sum((k * kiln.tensor(s)).sum() for k, s in zip(kflat, seeds)).backward()
    sum((t * torch.tensor(s)).sum() for t, s in zip(tflat, seeds)).backward()
    np.testing.assert_allclose(np_of(kx.grad), tx.grad.numpy(), **TOL64)
    for k, t in zip(kstates, tstates):
        np.testing.assert_allclose(np_of(k.grad), t.grad.numpy(), **TOL64)
    for (name, kparam), (_, tparam) in zip(kmod.named_parameters(), tmod.named_parameters()):
        np.testing.assert_allclose(np_of(kparam.grad), tparam.grad.numpy(), err_msg=name,
                                   **TOL64)


def test_a_batch_first_layer_reads_packed_input_as_torch_does():
    kmod, tmod = layer_pair("GRU", torch.float32, batch_first=True)
    _, _, kp, tp = packed_pair([2, 3, 1], True, False, trailing=(IN,))
    (kout, kh), (tout, th) = kmod(kp), tmod(tp)
    kpad, klen = R.pad_packed_sequence(kout, batch_first=True)
    tpad, tlen = TRNN.pad_packed_sequence(tout, batch_first=True)
    np.testing.assert_allclose(np_of(kpad), np_of(tpad), **TOL)
    np.testing.assert_allclose(np_of(kh), np_of(th), **TOL)
    np.testing.assert_array_equal(klen.numpy(), tlen.numpy())
    with pytest.raises(RuntimeError, match="for this packed batch"):
        kmod(kp, kiln.zeros(1, 2, H))


# ---- a char-level LSTM on variable-length lines, with clipping --------------

TEXT = ["the kiln fires", "a loop", "gradients flow back", "clip them", "pack", "ok then"]


class CharLSTM:
    """The same language model built in kiln or torch: embedding, a packed
    two-layer LSTM, a linear head; the loss is the next character's cross
    entropy over the real steps only (padding is ignore_index)."""

    def __init__(self, lib, vocab):
        self.lib = lib
        tnn = lib.nn
        self.embed = tnn.Embedding(vocab, 8)
        self.lstm = tnn.LSTM(8, 16, num_layers=2, batch_first=True)
        self.head = tnn.Linear(16, vocab)
        self.modules = [self.embed, self.lstm, self.head]

    def parameters(self):
        return [p for m in self.modules for p in m.parameters()]

    def loss(self, inputs, targets, lengths):
        utils = self.lib.nn.utils.rnn
        packed = utils.pack_padded_sequence(self.embed(inputs), lengths, batch_first=True,
                                            enforce_sorted=False)
        out, _ = self.lstm(packed)
        padded, _ = utils.pad_packed_sequence(out, batch_first=True,
                                              total_length=inputs.shape[1])
        logits = self.head(padded)
        return self.lib.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                    targets.reshape(-1), ignore_index=-1)


def char_batches():
    vocab = sorted(set("".join(TEXT)))
    ids = [[vocab.index(c) for c in line] for line in TEXT]
    batches = []
    for start in (0, 3):
        lines = ids[start:start + 3]
        longest = max(len(line) for line in lines) - 1
        inputs = np.zeros((3, longest), np.int64)
        targets = np.full((3, longest), -1, np.int64)
        for i, line in enumerate(lines):
            inputs[i, :len(line) - 1] = line[:-1]
            targets[i, :len(line) - 1] = line[1:]
        batches.append((inputs, targets, [len(line) - 1 for line in lines]))
    return len(vocab), batches


def test_a_char_lstm_with_clipping_trains_as_torch():
    vocab, batches = char_batches()
    torch.manual_seed(0)
    tmodel, kmodel = CharLSTM(torch, vocab), CharLSTM(kiln, vocab)
    for km, tm in zip(kmodel.modules, tmodel.modules):
        km.load_state_dict({k: v.detach().numpy().copy() for k, v in tm.state_dict().items()})
    kopt = optim.SGD(kmodel.parameters(), lr=1.0, momentum=0.5)
    topt = torch.optim.SGD(tmodel.parameters(), lr=1.0, momentum=0.5)
    klosses, tlosses, knorms, tnorms = [], [], [], []
    for step in range(8):
        inputs, targets, lengths = batches[step % 2]
        for model, opt, losses, norms, lib in ((kmodel, kopt, klosses, knorms, kiln),
                                               (tmodel, topt, tlosses, tnorms, torch)):
            opt.zero_grad()
            loss = model.loss(lib.tensor(inputs), lib.tensor(targets), lengths)
            loss.backward()
            norms.append(lib.nn.utils.clip_grad_norm_(model.parameters(), 0.15).item())
            opt.step()
            losses.append(loss.item())
    assert max(tnorms) > 0.15  # clipping changed the steps
    np.testing.assert_allclose(klosses, tlosses, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(knorms, tnorms, rtol=1e-4, atol=1e-5)
    assert tlosses[-1] < tlosses[0]
