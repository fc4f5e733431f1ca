"""tinygrad's runner (.bench/venv-tinygrad), CPU device (DEV=CPU, which
compiles its kernels with `clang`; bench/setup_frameworks.sh links one into
.bench/bin when only clang-NN is installed), NUM_CPU_THREADS = the job's
threads.

The model is written with Tensor ops on the driver's weights (linear,
conv2d, avg_pool2d, relu, sigmoid); every call goes through TinyJit, which
runs the function on its first call, captures the kernels on the second and
replays them from the third on; the checked outputs are those of the third
call (inference) or of three steps (training), so the replay is what is
checked. A training step is zero_grad, sparse_categorical_crossentropy
(mean), backward and tinygrad.nn.optim.SGD, the loss realized together with
the update (realizing it after opt.step() would compute it from the updated
weights). Each call ends with the device's synchronize(): the CPU device
runs kernels on a worker queue.

    .venv-tinygrad/bin/python bench/harness/run_tinygrad.py JOB.json   (started by bench/run_all.py)
"""
import os
import sys
from importlib import metadata

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np  # noqa: E402
from tinygrad import Context, Device, Tensor, TinyJit  # noqa: E402
from tinygrad.nn.optim import SGD  # noqa: E402

from harness import runner  # noqa: E402
from harness.workloads import LEARNING_RATE, MODELS, STEPS_CHECKED  # noqa: E402


def forward(model_name, params, x):
    for i, layer in enumerate(MODELS[model_name]):
        kind = layer[0]
        if kind == "linear":
            x = x.linear(params[f"{i}.weight"].T, params[f"{i}.bias"])
        elif kind == "conv":
            x = x.conv2d(params[f"{i}.weight"], params[f"{i}.bias"], padding=layer[4])
        elif kind == "avgpool":
            x = x.avg_pool2d(kernel_size=(layer[1], layer[1]))
        elif kind == "flatten":
            x = x.flatten(1)
        else:
            x = x.relu() if kind == "relu" else x.sigmoid()
    return x


def device_tensors(weights):
    return {name: Tensor(value).contiguous().realize() for name, value in weights.items()}


def synchronize():
    Device[Device.DEFAULT].synchronize()


def inference_mode(job, case):
    params = device_tensors(job.weights(case.model))
    x = Tensor(job.input(case)).realize()
    jitted = TinyJit(lambda x: forward(case.model, params, x).realize())

    def outputs():
        for _ in range(2):  # runs, then captures
            jitted(x)
        out = jitted(x)     # replays
        synchronize()
        return {"out": out.numpy()}

    def step():
        jitted(x)
        synchronize()
    return runner.Mode("tinyjit", "tinygrad TinyJit", outputs, step)


def training_mode(job, case):
    params = device_tensors(job.weights(case.model))
    x = Tensor(job.input(case)).realize()
    y = Tensor(job.target(case).astype(np.int32)).realize()
    opt = SGD(list(params.values()), lr=LEARNING_RATE)

    @TinyJit
    def train_step(x, y):
        with Context(TRAINING=1):
            opt.zero_grad()
            loss = forward(case.model, params, x).sparse_categorical_crossentropy(y)
            loss.backward()
            return loss.realize(*opt.schedule_step())

    def outputs():
        losses = [train_step(x, y).item() for _ in range(STEPS_CHECKED)]
        synchronize()
        return runner.training_outputs(losses, {k: v.numpy() for k, v in params.items()})

    def step():
        train_step(x, y)
        synchronize()
    return runner.Mode("tinyjit", "tinygrad TinyJit", outputs, step)


def build_modes(job, case):
    return [training_mode(job, case) if case.training else inference_mode(job, case)]


if __name__ == "__main__":
    runner.main("tinygrad", lambda: {"tinygrad": metadata.version("tinygrad")}, build_modes)
