"""Hybridized modules called as PyTorch code calls them: tensors by
keyword, None for an optional mask, flags and sizes as Python values."""
import numpy as np
import pytest

import kiln
from kiln import nn

RECORDED = []


class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, mask=None, scale=1.0, *, shift=None):
        RECORDED.append((mask is None, scale, shift is None))  # runs only while recording
        y = self.fc(x) * scale
        if mask is not None:
            y = y.masked_fill(mask, 0.0)
        return y if shift is None else y + shift


def test_keywords_none_and_numbers_each_get_their_graph():
    kiln.manual_seed(0)
    eager, hybrid = Masked(), Masked()
    hybrid.load_state_dict(eager.state_dict())
    hybrid.hybridize()
    x = kiln.randn(3, 4)
    mask = kiln.randn(3, 4) > 0
    shift = kiln.randn(4)
    calls = [((x,), {}), ((x,), {"mask": mask}), ((x, None, 2.0), {}), ((x,), {"scale": 3.0}),
             ((x, mask), {"shift": shift}), ((x,), {"mask": mask, "scale": 0.5})]
    for args, kwargs in calls:
        want = eager(*args, **kwargs)
        RECORDED.clear()
        for _ in range(3):
            got = hybrid(*args, **kwargs)
            np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
        assert len(RECORDED) == 1, (args, kwargs)  # recorded once, then replayed


def test_a_keyword_call_trains_like_eager():
    kiln.manual_seed(1)
    eager, hybrid = Masked(), Masked()
    hybrid.load_state_dict(eager.state_dict())
    hybrid.hybridize()
    x, mask = kiln.randn(5, 4), kiln.randn(5, 4) > 0
    for model in (eager, hybrid):
        model(x, mask=mask, scale=2.0).pow(2).sum().backward()
    for (name, p), (_, q) in zip(eager.named_parameters(), hybrid.named_parameters()):
        np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=1e-6, err_msg=name)


def test_layers_called_with_keywords_hybridize():
    kiln.manual_seed(2)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).eval()
    encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    src = kiln.randn(2, 5, 8)
    causal = nn.Transformer.generate_square_subsequent_mask(5)
    padding = kiln.tensor([[False] * 5, [False, False, False, True, True]])
    want = encoder(src, mask=causal, src_key_padding_mask=padding)
    encoder.hybridize()
    for _ in range(2):
        got = encoder(src, mask=causal, src_key_padding_mask=padding)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6,
                                   atol=1e-6)

    up = nn.ConvTranspose2d(3, 2, 3, stride=2)
    x = kiln.randn(1, 3, 4, 4)
    want = up(x, output_size=[10, 10])
    up.hybridize()
    got = up(x, output_size=[10, 10])
    assert tuple(got.shape) == (1, 2, 10, 10)
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())


def test_what_cannot_key_a_graph_is_refused_by_name():
    model = Masked().hybridize()
    with pytest.raises(TypeError, match="argument 'scale' is a set"):
        model(kiln.randn(3, 4), scale={1.0})
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        model(kiln.randn(3, 4), colour=1)


def test_tensors_inside_tuples_are_inputs_too():
    kiln.manual_seed(3)
    lstm = nn.LSTM(4, 6, batch_first=True)
    x = kiln.randn(2, 5, 4)
    state = (kiln.randn(1, 2, 6), kiln.randn(1, 2, 6))
    want, (h, c) = lstm(x, state)
    lstm.hybridize()
    for _ in range(2):
        got, (gh, gc) = lstm(x, state)
        for a, b in ((got, want), (gh, h), (gc, c)):
            np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    other = (kiln.randn(1, 2, 6), kiln.randn(1, 2, 6))
    lstm.hybridize(False)
    again = lstm(x, other)[0]
    lstm.hybridize()
    np.testing.assert_array_equal(lstm(x, other)[0].detach().numpy(), again.detach().numpy())


def test_trace_takes_and_saves_nested_inputs(tmp_path):
    kiln.manual_seed(4)
    lstm = nn.LSTM(4, 6)
    x = kiln.randn(5, 2, 4)
    state = (kiln.randn(1, 2, 6), kiln.randn(1, 2, 6))
    with kiln.no_grad():
        traced = kiln.jit.trace(lstm, (x, state))
        want = lstm(x, state)[0]
        np.testing.assert_array_equal(traced(x, state)[0].numpy(), want.numpy())
        traced.save(tmp_path / "lstm.kiln")
        loaded = kiln.jit.load(tmp_path / "lstm.kiln")
        np.testing.assert_array_equal(loaded(x, state)[0].numpy(), want.numpy())
    with pytest.raises(TypeError, match=r"called with inputs \(tensor, tensor\)"):
        traced(x, state[0])
