"""Saving and loading from Python: .kiln model files (SCENARIOS.md §3),
safetensors state dicts checked against the `safetensors` package, and the
weights mapped rather than copied."""
import subprocess
import sys

import numpy as np
import pytest

import kiln
from kiln import nn
from workloads import w1


def test_scenario_3_trace_look_save_load(tmp_path):
    net = w1()
    x = kiln.randn(1, 512)
    traced = kiln.jit.trace(net, x)
    text = str(traced.graph)
    assert "linear_act" in text and "param" in text
    traced.save(tmp_path / "my_mlp.kiln")

    loaded = kiln.jit.load(tmp_path / "my_mlp.kiln")
    assert kiln.allclose(loaded(x), net(x))
    assert kiln.equal(loaded(x), traced(x))
    assert str(loaded.graph) == text
    kiln.jit.load(tmp_path / "my_mlp.kiln", verify=True)


def test_output_structure_survives_the_file(tmp_path):
    class TwoHeads(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 3)
            self.b = nn.Linear(4, 2)

        def forward(self, x):
            return {"scores": self.a(x), "pair": (self.b(x), [kiln.relu(x)])}

    model = TwoHeads()
    x = kiln.randn(5, 4)
    kiln.jit.trace(model, x).save(tmp_path / "heads.kiln")
    out = kiln.jit.load(tmp_path / "heads.kiln")(x)
    want = model(x)
    assert list(out) == ["scores", "pair"]
    assert kiln.equal(out["scores"], want["scores"])
    assert isinstance(out["pair"], tuple) and isinstance(out["pair"][1], list)
    assert kiln.equal(out["pair"][1][0], want["pair"][1][0])


def test_a_function_with_two_outputs_and_no_example(tmp_path):
    def f(x, y):
        return x + y, x * y

    x, y = kiln.randn(3), kiln.randn(3)
    traced = kiln.jit.trace(f, (x, y))
    traced.save(tmp_path / "f.kiln", example_inputs=())
    loaded = kiln.jit.load(tmp_path / "f.kiln")
    assert all(kiln.equal(a, b) for a, b in zip(loaded(x, y), f(x, y)))
    with pytest.raises(RuntimeError, match="saved without an example"):
        kiln.jit.load(tmp_path / "f.kiln", verify=True)


def test_frozen_fast_math_model_round_trips(tmp_path):
    net = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                        nn.Linear(4 * 6 * 6, 3)).eval()
    x = kiln.randn(2, 1, 8, 8)
    traced = kiln.jit.trace(net, x, frozen=True, fast_math=True)
    traced.save(tmp_path / "frozen.kiln")
    loaded = kiln.jit.load(tmp_path / "frozen.kiln", verify=True)
    assert kiln.equal(loaded(x), traced(x))
    assert kiln.allclose(loaded(x), net(x), rtol=1e-4, atol=1e-5)


def test_bad_files_raise_and_name_the_problem(tmp_path):
    path = tmp_path / "m.kiln"
    kiln.jit.trace(w1(), kiln.randn(1, 512)).save(path)
    data = bytearray(path.read_bytes())
    data[40] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(RuntimeError, match="header fails its checksum"):
        kiln.jit.load(path)
    with pytest.raises(RuntimeError, match="cannot open"):
        kiln.jit.load(tmp_path / "absent.kiln")
    (tmp_path / "text.kiln").write_text("graph() {}")
    with pytest.raises(RuntimeError, match="not a kiln model"):
        kiln.jit.load(tmp_path / "text.kiln")


def test_loading_maps_weights_instead_of_copying_them(tmp_path):
    net = nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1024))
    kiln.jit.trace(net, kiln.randn(1, 1024)).save(tmp_path / "big.kiln")
    before = kiln._C._allocator_live_bytes()
    loaded = kiln.jit.load(tmp_path / "big.kiln")
    grown = kiln._C._allocator_live_bytes() - before
    assert grown < 64 * 1024, grown  # 8 MB of weights, none of it allocated
    assert loaded(kiln.randn(1, 1024)).shape == (1, 1024)


def test_peak_memory_while_loading_is_the_file_plus_a_little(tmp_path):
    path = tmp_path / "large.kiln"
    net = nn.Sequential(nn.Linear(4096, 4096), nn.Linear(4096, 2048))  # 96 MB
    kiln.jit.trace(net, kiln.randn(1, 4096)).save(path, example_inputs=())
    del net
    size = path.stat().st_size
    script = (
        "import resource, sys, kiln\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "m = kiln.jit.load(sys.argv[1])\n"
        "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print((after - before) * 1024)\n")
    grown = int(subprocess.run([sys.executable, "-c", script, str(path)], check=True,
                               capture_output=True, text=True).stdout)
    assert grown <= size + 16 * 2**20, (grown, size)


def test_state_dict_round_trip_and_load_state_dict(tmp_path):
    net = w1()
    kiln.save(net.state_dict(), tmp_path / "w1.safetensors", metadata={"format": "pt"})
    other = w1()
    loaded, metadata = kiln.load(tmp_path / "w1.safetensors", with_metadata=True)
    assert metadata == {"format": "pt"}
    assert list(loaded) == list(net.state_dict())
    other.load_state_dict(loaded)
    x = kiln.randn(2, 512)
    assert kiln.equal(other(x), net(x))


def test_kiln_state_dicts_are_what_safetensors_reads(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    tensors = {"f32": kiln.randn(3, 4), "f64": kiln.randn(2, dtype=kiln.float64),
               "i32": kiln.arange(6, dtype=kiln.int32), "i64": kiln.arange(5),
               "b": kiln.randn(3) > 0, "scalar": kiln.tensor(2.5), "empty": kiln.zeros(0, 3)}
    kiln.save(tensors, tmp_path / "k.safetensors")
    theirs = st.load_file(str(tmp_path / "k.safetensors"))
    assert set(theirs) == set(tensors)
    for name, tensor in tensors.items():
        np.testing.assert_array_equal(theirs[name], tensor.numpy())
        assert theirs[name].dtype == tensor.numpy().dtype


def test_kiln_reads_what_safetensors_writes(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    arrays = {"w": np.random.randn(7, 3).astype(np.float32),
              "d": np.random.randn(5),  # f64 after an odd-sized f32: the writer aligns
              "n": np.arange(4, dtype=np.int64), "m": np.array([True, False])}
    st.save_file(arrays, str(tmp_path / "theirs.safetensors"), metadata={"k": "v"})
    loaded, metadata = kiln.load(tmp_path / "theirs.safetensors", with_metadata=True)
    assert metadata == {"k": "v"}
    for name, array in arrays.items():
        np.testing.assert_array_equal(loaded[name].numpy(), array)


def test_save_refuses_what_a_checkpoint_cannot_hold(tmp_path):
    with pytest.raises(TypeError, match="a checkpoint holds tensors"):
        kiln.save([kiln.zeros(1), object()], tmp_path / "x")
    (tmp_path / "bad.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}")
    with pytest.raises(RuntimeError, match="the header claims"):
        kiln.load(tmp_path / "bad.safetensors")
