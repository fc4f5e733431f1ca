"""kiln.save / kiln.load of checkpoints (nested containers, no pickle on
load), refusal of files that are not kiln's, and copy.deepcopy / pickle of
tensors and modules, as PyTorch programs use them."""
import copy
import math
import pickle

import numpy as np
import pytest

import kiln

torch = pytest.importorskip("torch")


def _net():
    return kiln.nn.Sequential(kiln.nn.Linear(3, 4), kiln.nn.ReLU(), kiln.nn.Linear(4, 2))


def test_a_nested_checkpoint_round_trips_with_its_types(tmp_path):
    net = _net()
    state = {3: {"step": 7, "exp_avg": kiln.randn(4, 3)}, 0: {"step": 7}}
    checkpoint = {
        "epoch": 3, "loss": 0.125, "best": float("inf"), "nan": float("nan"),
        "big": 2**70, "name": "run-1", "done": False, "none": None,
        "model": net.state_dict(),
        "optimizer": {"state": state, "param_groups": [{"lr": 0.1, "params": [0, 1, 2, 3],
                                                        "betas": (0.9, 0.999)}]},
        "ints": kiln.arange(5), "mask": kiln.tensor([True, False]),
    }
    kiln.save(checkpoint, tmp_path / "ckpt.pt")
    got = kiln.load(tmp_path / "ckpt.pt")
    assert set(got) == set(checkpoint)
    assert got["epoch"] == 3 and type(got["epoch"]) is int
    assert got["loss"] == 0.125 and got["best"] == math.inf and math.isnan(got["nan"])
    assert got["big"] == 2**70 and got["name"] == "run-1"
    assert got["done"] is False and got["none"] is None
    assert list(got["model"]) == list(net.state_dict())
    for name, value in net.state_dict().items():
        assert kiln.equal(got["model"][name], value)
    assert set(got["optimizer"]["state"]) == {3, 0}  # int keys stay ints
    assert kiln.equal(got["optimizer"]["state"][3]["exp_avg"], state[3]["exp_avg"])
    group = got["optimizer"]["param_groups"][0]
    assert group["betas"] == (0.9, 0.999) and isinstance(group["betas"], tuple)
    assert group["params"] == [0, 1, 2, 3]
    assert got["ints"].dtype == kiln.int64 and got["mask"].dtype == kiln.bool
    other = _net()
    other.load_state_dict(got["model"])
    x = kiln.randn(5, 3)
    assert kiln.equal(other(x), net(x))


def test_a_tensor_met_twice_is_stored_once(tmp_path):
    shared = kiln.randn(3)
    kiln.save({"a": [shared, shared], "b": (shared,)}, tmp_path / "tied.pt")
    got = kiln.load(tmp_path / "tied.pt")
    st = pytest.importorskip("safetensors.numpy")
    assert len(st.load_file(str(tmp_path / "tied.pt"))) == 1
    assert kiln.equal(got["a"][0], shared) and got["a"][0] is got["b"][0]


def test_a_plain_state_dict_stays_a_plain_safetensors_file(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    kiln.save({"w": kiln.randn(2, 2)}, tmp_path / "w.safetensors")
    _, metadata = kiln.load(tmp_path / "w.safetensors", with_metadata=True)
    assert metadata == {}
    assert list(st.load_file(str(tmp_path / "w.safetensors"))) == ["w"]


def test_what_a_checkpoint_cannot_hold_is_named(tmp_path):
    with pytest.raises(TypeError, match=r"obj\['model'\] is a Sequential.*state_dict"):
        kiln.save({"model": _net()}, tmp_path / "x")
    with pytest.raises(TypeError, match=r"obj\[1\] is a NumPy ndarray"):
        kiln.save([1, np.zeros(2)], tmp_path / "x")
    with pytest.raises(TypeError, match="keys must be str, int"):
        kiln.save({(1, 2): 3}, tmp_path / "x")
    with pytest.raises(ValueError, match="kiln's own"):
        kiln.save({"a": kiln.zeros(1)}, tmp_path / "x", metadata={"kiln.structure": "{}"})


def test_a_pytorch_checkpoint_is_refused_with_what_it_looks_like(tmp_path):
    torch.save({"w": torch.zeros(2)}, tmp_path / "model.pt")
    with pytest.raises(RuntimeError, match="zip archive.*torch.save.*safetensors"):
        kiln.load(tmp_path / "model.pt")
    with open(tmp_path / "p.pkl", "wb") as f:
        pickle.dump({"w": 1}, f)
    with pytest.raises(RuntimeError, match="Python pickle"):
        kiln.load(tmp_path / "p.pkl")
    np.save(tmp_path / "a.npy", np.zeros(3))
    with pytest.raises(RuntimeError, match="NumPy"):
        kiln.load(tmp_path / "a.npy")


def test_load_accepts_torch_loads_keywords(tmp_path):
    kiln.save({"w": kiln.ones(2)}, tmp_path / "w.pt")
    got = kiln.load(tmp_path / "w.pt", map_location="cpu", weights_only=True)
    assert kiln.equal(got["w"], kiln.ones(2))
    assert kiln.equal(kiln.load(tmp_path / "w.pt", map_location=lambda s, loc: s)["w"],
                      kiln.ones(2))
    with pytest.raises(RuntimeError, match="cuda"):
        kiln.load(tmp_path / "w.pt", map_location="cuda:0")


def test_deepcopy_of_a_tensor_is_independent_and_keeps_its_flags():
    x = kiln.randn(3, requires_grad=True)
    (x * 2).sum().backward()
    y = copy.deepcopy(x)
    assert y is not x and y.requires_grad and y.is_leaf
    assert kiln.equal(y, x) and kiln.equal(y.grad, x.grad)
    with kiln.no_grad():
        y.add_(1)
    assert not kiln.equal(y, x)
    z = x * 2
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(z)


def test_deepcopy_of_a_module_copies_its_parameters_and_keeps_ties():
    tied = kiln.nn.Module()
    tied.a = kiln.nn.Linear(2, 2)
    tied.b = kiln.nn.Linear(2, 2)
    tied.b.weight = tied.a.weight
    copied = copy.deepcopy(tied)
    assert isinstance(copied.a.weight, kiln.nn.Parameter)
    assert copied.a.weight is copied.b.weight  # the tie survives
    assert copied.a.weight is not tied.a.weight
    with kiln.no_grad():
        copied.a.weight.zero_()
    assert not kiln.equal(tied.a.weight, copied.a.weight)


def test_a_hybridized_module_copies_and_pickles():
    net = _net().hybridize()
    x = kiln.randn(4, 3)
    y = net(x)
    for other in (copy.deepcopy(net), pickle.loads(pickle.dumps(net))):
        assert other._hybrid is not None and other._hybrid is not net._hybrid
        assert kiln.allclose(other(x), y)
        with kiln.no_grad():
            other[0].bias.add_(1.0)
        assert not kiln.allclose(other(x), y)  # its own parameters, its own compiled entry
        assert kiln.allclose(net(x), y)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.int64, kiln.int32, kiln.bool])
def test_pickle_round_trips_tensors(dtype):
    x = (kiln.randn(3, 4) * 10).to(dtype)
    for t in (x, x.t(), x[1]):
        got = pickle.loads(pickle.dumps(t))
        assert got.dtype == t.dtype and got.shape == t.shape and kiln.equal(got, t)
    p = kiln.nn.Parameter(kiln.randn(2))
    got = pickle.loads(pickle.dumps(p))
    assert isinstance(got, kiln.nn.Parameter) and got.requires_grad and kiln.equal(got, p)
