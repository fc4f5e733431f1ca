"""Shared by the tests that run a kiln nn layer and torch's side by side:
the same inputs, torch's weights loaded into the kiln module, outputs and
gradients compared, and the module's traced and hybridized forms checked
against its eager result."""
import io

import numpy as np
import torch

import kiln

DTYPES = {np.float32: (kiln.float32, torch.float32), np.float64: (kiln.float64, torch.float64)}
# float64 results agree to rounding; float32 to a few ulps of the sums.
TOL = {np.float64: {"rtol": 1e-10, "atol": 1e-12}, np.float32: {"rtol": 1e-5, "atol": 1e-5}}


def inputs(shape, dtype=np.float64, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def pair_of(x):
    """The same values as a kiln and a torch tensor that require grad."""
    kx = kiln.tensor(x, dtype=DTYPES[x.dtype.type][0], requires_grad=True)
    return kx, torch.tensor(x, requires_grad=True)


def load_torch_weights(ours, theirs):
    """torch's parameters, set to distinct values (so a wrong layout
    shows), copied with its buffers into the kiln module by state_dict;
    the keys must be torch's."""
    with torch.no_grad():
        for p in theirs.parameters():
            p.copy_(torch.linspace(-1.3, 1.1, p.numel()).reshape(p.shape).sin() + 0.2)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict(theirs.state_dict())


def seed_like(y):
    """A fixed upstream gradient of y's shape, so every output counts."""
    return np.cos(np.arange(y.numel()) * 0.7).reshape(tuple(y.shape))


def assert_close(got, want, dtype):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), **TOL[dtype])


def compare(kfn, tfn, arrays, dtype=np.float64, params=()):
    """kfn(*kiln tensors) vs tfn(*torch tensors): the output, then the
    gradients of the inputs and of the (kiln, torch) parameter pairs."""
    pairs = [pair_of(a.astype(dtype)) for a in arrays]
    ky = kfn(*[k for k, _ in pairs])
    ty = tfn(*[t for _, t in pairs])
    assert tuple(ky.shape) == tuple(ty.shape)
    assert_close(ky.detach().numpy(), ty.detach().numpy(), dtype)
    seed = seed_like(ty)
    (ky * kiln.tensor(seed, dtype=ky.dtype)).sum().backward()
    (ty * torch.tensor(seed, dtype=ty.dtype)).sum().backward()
    for k, t in pairs:
        assert_close(k.grad.numpy(), t.grad.numpy(), dtype)
    for kp, tp in params:
        assert (kp.grad is None) == (tp.grad is None)
        if tp.grad is not None:
            assert_close(kp.grad.numpy(), tp.grad.numpy(), dtype)
    return ky


def compare_modules(ours, theirs, x, dtype=np.float64, **call_kwargs):
    """The two modules (torch's weights loaded into ours) on x: outputs and
    gradients of x and of every parameter."""
    load_torch_weights(ours, theirs)
    if dtype == np.float64:
        ours.double()
        theirs.double()
    params = list(zip(ours.parameters(), theirs.parameters(), strict=True))
    return compare(lambda k: ours(k, **call_kwargs), lambda t: theirs(t, **call_kwargs), [x],
                   dtype, params)


class _CallWith(kiln.nn.Module):
    """A parent whose forward passes keyword arguments to its child, as
    models call ConvTranspose2d(x, output_size=...): a hybridized call
    itself takes tensors positionally only."""

    def __init__(self, child, kwargs):
        super().__init__()
        self.child, self.kwargs = child, kwargs

    def forward(self, x):
        return self.child(x, **self.kwargs)


def check_traced_and_hybridized(module, x, **call_kwargs):
    """kiln.jit.trace and hybridize() give the module's eager result."""
    if call_kwargs:
        module = _CallWith(module, call_kwargs)
    kx = kiln.tensor(x)
    eager = module(kx).detach().numpy()
    traced = kiln.jit.trace(module, kx)
    np.testing.assert_array_equal(traced(kx).detach().numpy(), eager)
    module.hybridize()
    try:
        for _ in range(2):  # the recording call, then the compiled plan
            np.testing.assert_array_equal(module(kx).detach().numpy(), eager)
    finally:
        module.hybridize(False)


def eval_pair(build, *args):
    """build(torch.nn, *args) and build(kiln.nn, *args) in eval mode, the
    kiln one holding the torch one's weights, whose batch-norm statistics
    and scales are drawn (seeded) so that folding them is not the identity."""
    torch.manual_seed(0)
    theirs = build(torch.nn, *args)
    with torch.no_grad():
        for module in theirs.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-0.5, 0.5)
                module.running_var.uniform_(0.5, 2.0)
                module.weight.uniform_(0.5, 1.5)
    theirs.eval()
    ours = build(kiln.nn, *args)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    ours.eval()
    return theirs, ours


def onnx_runtime_output(compiled, kx, x):
    """What ONNX Runtime computes on `x` from kiln's ONNX export of the
    compiled model `compiled` (traced on `kx`)."""
    import onnxruntime as ort
    buffer = io.BytesIO()
    kiln.onnx.export(compiled, (kx,), buffer)
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]
