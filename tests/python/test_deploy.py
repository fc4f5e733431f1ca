"""Deployment without Python: SCENARIOS.md §3 and the end of §6 end to end.
Python traces and saves; the `kiln` tool and a C++ program built against
the *installed* kiln (`cmake --install`, then find_package(kiln) in
examples/deploy) load the file and give the outputs Python gave.

The C++ build folder is $KILN_BUILD_DIR, or build/release (what `make test`
builds)."""
import os
import pathlib
import subprocess

import numpy as np
import pytest

import kiln
from kiln import nn, optim

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("KILN_BUILD_DIR", ROOT / "build" / "release"))
KILN_TOOL = BUILD / "kiln"


def run(*args, **kwargs):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, **kwargs)


@pytest.fixture(scope="module")
def deploy_app(tmp_path_factory):
    """examples/deploy built against kiln installed into a fresh prefix."""
    assert (BUILD / "CMakeCache.txt").exists(), f"no C++ build at {BUILD} (run make build)"
    work = tmp_path_factory.mktemp("deploy")
    prefix, build = work / "prefix", work / "build"
    for command in (["cmake", "--install", BUILD, "--prefix", prefix],
                    ["cmake", "-S", ROOT / "examples" / "deploy", "-B", build, "-G", "Ninja",
                     f"-DCMAKE_PREFIX_PATH={prefix}"],
                    ["cmake", "--build", build]):
        result = run(*command)
        assert result.returncode == 0, result.stdout + result.stderr
    assert (prefix / "include" / "kiln" / "kiln.h").exists()
    assert (prefix / "bin" / "kiln").exists()
    return build / "deploy", prefix


def test_scenario_3_cpp_program_prints_what_python_printed(deploy_app, tmp_path):
    app, _ = deploy_app
    net = nn.Sequential(nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                        nn.Linear(128, 2))
    x = kiln.randn(1, 512)
    kiln.jit.trace(net, x).save(tmp_path / "my_mlp.kiln")
    np.save(tmp_path / "x.npy", x.numpy())
    result = run(app, tmp_path / "my_mlp.kiln", tmp_path / "x.npy")
    assert result.returncode == 0, result.stderr
    with kiln.no_grad():
        assert result.stdout == str(net(x)) + "\n"
    # With no input it runs on a random one of the model's shape.
    assert run(app, tmp_path / "my_mlp.kiln").returncode == 0


def test_scenario_6_train_then_deploy_what_was_trained(deploy_app, tmp_path):
    app, _ = deploy_app

    class MyModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(10, 5)
            self.fc2 = nn.Linear(5, 2)

        def forward(self, x):
            return self.fc2(nn.functional.relu(self.fc1(x)))

    data, target = kiln.randn(100, 10), kiln.randint(0, 2, (100,))
    model = MyModel()
    model.hybridize()
    opt = optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    for _epoch in range(3):
        for i in range(0, 100, 10):
            loss = criterion(model(data[i:i + 10]), target[i:i + 10])
            opt.zero_grad()
            loss.backward()
            opt.step()
    x = data[:10]
    kiln.jit.trace(model, x).save(tmp_path / "trained.kiln")
    np.save(tmp_path / "x.npy", x.numpy())
    result = run(app, tmp_path / "trained.kiln", tmp_path / "x.npy")
    assert result.returncode == 0, result.stderr
    with kiln.no_grad():
        assert result.stdout == str(model(x)) + "\n"


def test_installed_kiln_tool_runs_npy_in_and_out(deploy_app, tmp_path):
    _, prefix = deploy_app
    tool = prefix / "bin" / "kiln"
    net = nn.Sequential(nn.Conv2d(1, 3, 3), nn.ReLU(), nn.Flatten(), nn.Linear(3 * 4 * 4, 2))
    x = kiln.randn(2, 1, 6, 6)
    kiln.jit.trace(net, x).save(tmp_path / "m.kiln")
    with kiln.no_grad():
        want = net(x).numpy()
    np.save(tmp_path / "x.npy", x.numpy())
    result = run(tool, "run", tmp_path / "m.kiln", "--input", tmp_path / "x.npy",
                 "--output", tmp_path / "y.npy")
    assert result.returncode == 0, result.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), want)
    # NumPy's Fortran-ordered and float64 arrays: the first is read, the
    # second refused with the types the model takes.
    np.save(tmp_path / "xf.npy", np.asfortranarray(x.numpy()))
    result = run(tool, "run", tmp_path / "m.kiln", "-i", tmp_path / "xf.npy",
                 "-o", tmp_path / "yf.npy")
    assert result.returncode == 0, result.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "yf.npy"), want)
    np.save(tmp_path / "x64.npy", x.numpy().astype(np.float64))
    result = run(tool, "run", tmp_path / "m.kiln", "-i", tmp_path / "x64.npy")
    assert result.returncode == 1 and "float32[2, 1, 6, 6]" in result.stderr, result.stderr


def test_kiln_tool_info_bench_dot_and_errors(tmp_path):
    assert KILN_TOOL.exists(), f"no kiln tool at {KILN_TOOL}"
    net = nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 2))
    kiln.jit.trace(net, kiln.randn(3, 8)).save(tmp_path / "m.kiln")
    info = run(KILN_TOOL, "info", tmp_path / "m.kiln", "--graph")
    assert info.returncode == 0, info.stderr
    for text in ("0.weight", "float32[3, 8]", "planned", "linear_act", "example      stored"):
        assert text in info.stdout, info.stdout
    bench = run(KILN_TOOL, "bench", tmp_path / "m.kiln", "--iterations", "50", "--warmup", "5")
    assert bench.returncode == 0 and "p50" in bench.stdout and "samples/s" in bench.stdout
    dot = run(KILN_TOOL, "dot", tmp_path / "m.kiln")
    assert dot.returncode == 0 and dot.stdout.startswith("digraph")
    example = run(KILN_TOOL, "run", tmp_path / "m.kiln", "--example", "--verify")
    assert example.returncode == 0 and "tensor(" in example.stdout
    assert run(KILN_TOOL, "--help").returncode == 0
    missing = run(KILN_TOOL, "info", tmp_path / "absent.kiln")
    assert missing.returncode == 1 and "kiln: error: cannot open" in missing.stderr
    assert run(KILN_TOOL, "no-such-command").returncode != 0
    assert run(KILN_TOOL).returncode != 0


def test_kiln_tool_runs_another_batch_than_the_saved_one(tmp_path):
    net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.Sigmoid(), nn.AvgPool2d(2), nn.Flatten(),
                        nn.Linear(2 * 3 * 3, 4))
    kiln.jit.trace(net, kiln.randn(1, 1, 8, 8)).save(tmp_path / "m.kiln")
    x = kiln.randn(5, 1, 8, 8)
    np.save(tmp_path / "x.npy", x.numpy())
    result = run(KILN_TOOL, "run", tmp_path / "m.kiln", "-i", tmp_path / "x.npy",
                 "-o", tmp_path / "y.npy")
    assert result.returncode == 0, result.stderr
    with kiln.no_grad():
        np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), net(x).numpy())
    bench = run(KILN_TOOL, "bench", tmp_path / "m.kiln", "--batch", "32", "--iterations", "20")
    assert bench.returncode == 0 and "(batch 32," in bench.stdout, bench.stderr

    def batch_last(x):
        return kiln.relu(x.t())

    kiln.jit.trace(batch_last, kiln.randn(2, 3)).save(tmp_path / "t.kiln")
    refused = run(KILN_TOOL, "bench", tmp_path / "t.kiln", "--batch", "4")
    assert refused.returncode == 1 and "traced again at this batch" in refused.stderr
