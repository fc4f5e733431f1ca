"""Devices as PyTorch programs use them (issue 23): kiln.device, device= on
factories, Tensor.to/.cpu/.cuda/.device, Module.to/.cpu/.double, and
kiln.cuda. kiln's one device is the CPU; a CUDA device can be named and
compared as in PyTorch, and placing anything on it is a clear error."""
import copy
import pickle

import numpy as np
import pytest
import torch

import kiln
from kiln import nn


def test_the_usual_device_line_runs_as_written():
    device = kiln.device("cuda" if kiln.cuda.is_available() else "cpu")
    model = nn.Linear(3, 2).to(device)
    x = kiln.randn(4, 3, device=device)
    y = model(x.to(device))
    assert y.device == device == "cpu" and y.is_cpu and not y.is_cuda
    assert y.cpu() is y and y.cpu().detach().numpy().shape == (4, 2)
    assert kiln.cuda.device_count() == 0
    kiln.cuda.manual_seed_all(0)  # nothing to seed, as in PyTorch


@pytest.mark.parametrize("spec", ["cpu", "cuda", "cuda:1", ("cuda", 2), "cpu:0"])
def test_device_objects_match_torchs(spec):
    args = spec if isinstance(spec, tuple) else (spec,)
    ours, theirs = kiln.device(*args), torch.device(*args)
    assert (ours.type, ours.index) == (theirs.type, theirs.index)
    assert str(ours) == str(theirs)
    assert repr(ours) == repr(theirs)
    assert ours == kiln.device(ours) and hash(ours) == hash(kiln.device(str(ours)))
    assert pickle.loads(pickle.dumps(ours)) == ours and copy.deepcopy(ours) == ours


@pytest.mark.parametrize("bad, message", [
    ("gpu", "Expected one of cpu, cuda device type at start of device string: gpu"),
    ("cuda:x", "Invalid device string: 'cuda:x'"),
    ("cuda:-1", "Invalid device string"),
    (0, "Cannot access accelerator device when none is available"),  # as torch 2.13 says
])
def test_bad_device_strings_say_what_is_wrong(bad, message):
    with pytest.raises(RuntimeError, match=message):
        kiln.device(bad)


def test_cuda_placement_is_an_error_that_says_why():
    x = kiln.ones(2)
    for place in (lambda: x.cuda(), lambda: x.to("cuda"), lambda: x.to(kiln.device("cuda", 0)),
                  lambda: kiln.zeros(2, device="cuda"), lambda: kiln.tensor([1.0], device="cuda:0"),
                  lambda: nn.Linear(2, 2).cuda(), lambda: nn.Linear(2, 2).to("cuda"),
                  lambda: kiln.cuda.synchronize()):
        with pytest.raises(RuntimeError, match="kiln has no CUDA backend yet"):
            place()


def test_every_factory_takes_device():
    cpu = kiln.device("cpu")
    made = [kiln.tensor([1.0], device=cpu), kiln.zeros(2, device="cpu"), kiln.ones(2, device=cpu),
            kiln.empty(2, device=cpu), kiln.full([2], 3.0, device=cpu),
            kiln.arange(3, device=cpu), kiln.linspace(0, 1, 3, device=cpu),
            kiln.eye(2, device=cpu), kiln.rand(2, device=cpu), kiln.randn(2, device=cpu),
            kiln.randint(0, 3, (2,), device=cpu)]
    t = kiln.ones(2)
    made += [kiln.zeros_like(t, device=cpu), kiln.ones_like(t, device=cpu),
             kiln.empty_like(t, device=cpu), kiln.full_like(t, 2.0, device=cpu),
             kiln.rand_like(t, device=cpu), kiln.randn_like(t, device=cpu)]
    assert all(m.device == cpu for m in made)


def test_tensor_to_takes_torchs_forms():
    x = kiln.tensor([1.5, -2.0])
    tx = torch.tensor([1.5, -2.0])
    other = kiln.zeros(1, dtype=kiln.float64)
    cases = [((kiln.float64,), (torch.float64,)), (("cpu",), ("cpu",)),
             (("cpu", kiln.int64), ("cpu", torch.int64)),
             ((other,), (torch.zeros(1, dtype=torch.float64),))]
    for ours, theirs in cases:
        got, want = x.to(*ours), tx.to(*theirs)
        assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert x.to(dtype=kiln.float32, device="cpu") is x  # nothing to change: itself
    assert x.to(kiln.float32, copy=True) is not x
    assert x.to("cpu", non_blocking=True) is x
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        x.to(colour="red")


def test_to_keeps_autograd_flowing():
    x = kiln.tensor([1.0, 2.0], requires_grad=True)
    x.to(kiln.float64).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])


def test_module_to_dtype_converts_floating_parameters_and_buffers_as_torch():
    kiln.manual_seed(0)
    ours = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4),
                                 torch.nn.ReLU(), torch.nn.Linear(4, 2))
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    assert ours.double() is ours
    theirs.double()
    for (name, a), (_, b) in zip(ours.state_dict().items(), theirs.state_dict().items()):
        assert str(a.dtype).split(".")[1] == str(b.dtype).split(".")[1], name
    assert all(p.requires_grad for p in ours.parameters())
    x = np.random.default_rng(0).standard_normal((5, 3))
    got = ours(kiln.tensor(x, dtype=kiln.float64))
    want = theirs(torch.tensor(x))
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
    ours.float()
    assert {str(p.dtype) for p in ours.parameters()} == {"kiln.float32"}
    with pytest.raises(TypeError, match="only accepts floating point dtypes"):
        ours.to(kiln.int64)
    with pytest.raises(TypeError, match="kiln has no float16"):
        ours.half()


def test_module_to_converts_existing_gradients():
    model = nn.Linear(2, 1)
    model(kiln.ones(1, 2)).sum().backward()
    model.double()
    assert str(model.weight.grad.dtype) == "kiln.float64"
