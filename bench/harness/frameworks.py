"""The frameworks bench/run_all.py sets side by side: where each one's
interpreter (or binary) is, which modes it has, and the environment that
holds it to N threads (set before it starts, as thread pools read it once).

Every framework's modes are listed here, so that the table has a row for
each of them even when the framework could not be installed or its runner
died: the row then says why instead of a time.
"""
import json
import os
import pathlib
import sys
from dataclasses import dataclass, field

from harness.machine import ROOT, find_or_build

HARNESS = pathlib.Path(__file__).resolve().parent
# The kiln libraries the C++ runner links, in dependency order.
KILN_LIBS = ["kiln_nn", "kiln_optim", "kiln_io", "kiln_autograd", "kiln_ops", "kiln_kernels_cpu",
             "kiln_core", "kiln_util"]


@dataclass
class Framework:
    name: str
    label: str
    # [(mode id, row label, "both" | "infer" | "train")]: one table row per
    # mode; inference runs under no_grad unless the label says (grad).
    modes: list
    venv: str = ""    # .bench/venv-<venv>; "" = the main .venv (sys.executable)
    kiln: bool = False
    no_training_reason: str = ""
    env: dict = field(default_factory=dict)

    def modes_for(self, case):
        """[(mode id, row label)] that run in `case`."""
        wanted = "train" if case.training else "infer"
        return [(id, label) for id, label, applies in self.modes if applies in ("both", wanted)]


TORCH_COMPILED = [("jit-script", "torch.jit.script", "both"),
                  ("jit-trace", "torch.jit.trace", "both"), ("compile", "torch.compile", "both")]

FRAMEWORKS = [
    Framework("kiln", "kiln, Python",
              [("eager-grad", "kiln eager (grad)", "infer"), ("eager", "kiln eager", "both"),
               ("hybridize", "kiln hybridize()", "both"),
               ("jit-trace", "kiln jit.trace", "infer"),
               ("compile", "kiln.compile(step)", "train"),
               ("cpp-loop", "kiln compiled, C++ loop", "both")], kiln=True),
    Framework("kiln-cpp", "kiln, C++", [("eager-cpp", "kiln eager, C++", "both")], kiln=True),
    Framework("torch", "PyTorch",
              [("eager-grad", "PyTorch eager (grad)", "infer"),
               ("eager", "PyTorch eager", "both")] + TORCH_COMPILED),
    Framework("onnxruntime", "ONNX Runtime", [("session", "ONNX Runtime", "infer")],
              no_training_reason="inference only (onnxruntime, not onnxruntime-training)"),
    Framework("tensorflow", "TensorFlow",
              [("eager", "TensorFlow eager", "both"), ("function", "tf.function", "both"),
               ("function-xla", "tf.function(jit_compile=True)", "both")],
              venv="tensorflow", env={"TF_CPP_MIN_LOG_LEVEL": "2"}),
    Framework("jax", "JAX", [("jit", "jax.jit", "both")], venv="jax",
              env={"JAX_PLATFORMS": "cpu"}),
    Framework("mxnet", "MXNet", [("eager", "MXNet Gluon eager", "both"),
                                 ("hybridize", "MXNet hybridize()", "both")], venv="mxnet"),
    Framework("tinygrad", "tinygrad", [("tinyjit", "tinygrad TinyJit", "both")],
              venv="tinygrad", env={"DEV": "CPU"}),
]
FRAMEWORKS_BY_NAME = {f.name: f for f in FRAMEWORKS}
BASELINE = ("torch", "eager")            # the "PyTorch eager" ratios divide by
BASELINE_GRAD = ("torch", "eager-grad")  # for kiln's rows that record grad


def thread_env(framework, threads, venv_root):
    """The child's environment: every thread knob of every library it may
    load, at `threads`, and .bench/bin (tinygrad's `clang`) first on PATH."""
    env = dict(os.environ)
    n = str(threads)
    env.update({"OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n, "OPENBLAS_NUM_THREADS": n,
                "KILN_BENCH_THREADS": n, "PYTHONDONTWRITEBYTECODE": "1"})
    env["PATH"] = f"{pathlib.Path(venv_root) / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    if framework.name == "tensorflow":
        env.update({"TF_NUM_INTRAOP_THREADS": n, "TF_NUM_INTEROP_THREADS": "1"})
    if framework.name == "jax":
        eigen = "false" if threads == 1 else "true"
        env["XLA_FLAGS"] = (f"--xla_cpu_multi_thread_eigen={eigen} "
                            f"intra_op_parallelism_threads={threads}")
    if framework.name == "mxnet":
        env.update({"MXNET_CPU_WORKER_NTHREADS": "1", "MXNET_SUBGRAPH_VERBOSE": "0"})
    if framework.name == "tinygrad":
        env["NUM_CPU_THREADS"] = n
    env.update(framework.env)
    return env


def _venv_status(framework, venv_root):
    """(python path, None) or (None, why it is not installed)."""
    venv = pathlib.Path(venv_root) / f"venv-{framework.venv}"
    python = venv / "bin" / "python"
    if python.exists() and (venv / ".requirements-sha256").exists():
        return python, None
    failed = pathlib.Path(venv_root) / f"setup-{framework.venv}.failed"
    if failed.exists():
        lines = failed.read_text().splitlines()
        return None, lines[1] if len(lines) > 1 else "setup failed"
    return None, f"no {venv.name} under {venv_root} (run bench/setup_frameworks.sh)"


def command(framework, job_path, venv_root):
    """(argv to start the runner, None) or (None, why it cannot start). The
    C++ runner takes its job as flags (see bench/eager_cpp.cpp)."""
    if framework.name == "kiln-cpp":
        return _cpp_command(job_path)
    script = str(HARNESS / f"run_{framework.name}.py")
    if not framework.venv:
        return [sys.executable, script, str(job_path)], None
    python, why = _venv_status(framework, venv_root)
    if python is None:
        return None, f"not installed: {why}"
    return [str(python), script, str(job_path)], None


def _cpp_command(job_path):
    lib_dir = ROOT / "build/release"
    libs = [lib_dir / f"lib{name}.so" for name in KILN_LIBS]
    missing = [lib.name for lib in libs if not lib.exists()]
    if missing and not (ROOT / "build/release/bench/kiln_bench_eager_cpp").exists():
        return None, f"not available: kiln's C++ libraries are not built ({missing[0]})"
    binary, origin = find_or_build(
        "kiln_bench_eager_cpp", "bench/eager_cpp.cpp",
        extra_flags=["-I", str(ROOT / "src"), "-Wno-missing-field-initializers"],
        link=[*libs, f"-Wl,-rpath,{lib_dir}"])
    if binary is None:
        return None, f"not available: {origin}"
    job = json.loads(pathlib.Path(job_path).read_text())
    argv = [str(binary), "--data", job["npy_dir"], "--out", job["out"]]
    for flag in ("repeats", "calls", "warmup", "repetition_s", "batch1_repetition_s"):
        argv += [f"--{flag.replace('_', '-')}", str(job[flag])]
    for case_id, model, training in job["case_specs"]:
        argv += ["--case", f"{case_id}:{model}:{'train' if training else 'infer'}"]
    return argv, None
