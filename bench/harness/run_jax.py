"""JAX's runner (.bench/venv-jax): jax.jit on the CPU backend, XLA held to
the job's threads through XLA_FLAGS (set by the driver before JAX starts).

The model is a pure function of a parameter dict (the driver's weights as
jax arrays): Linear as x @ W.T + b, conv as lax.conv_general_dilated in
NCHW/OIHW (PyTorch's layouts, so no transposes), avg pool as
lax.reduce_window sums / k². A training step is jax.value_and_grad of the
mean cross-entropy (log_softmax, picked by label) and the SGD update
params - lr * grads, all in one jitted function, the parameters passed in
and returned (JAX's functional form). Every call ends with
block_until_ready(): JAX dispatches asynchronously.

    .bench/venv-jax/bin/python bench/harness/run_jax.py JOB.json   (started by bench/run_all.py)
"""
import os
import sys
from importlib import metadata

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

from harness import runner  # noqa: E402
from harness.workloads import LEARNING_RATE, MODELS, STEPS_CHECKED  # noqa: E402


def forward(model_name, params, x):
    for i, layer in enumerate(MODELS[model_name]):
        kind = layer[0]
        if kind == "linear":
            x = x @ params[f"{i}.weight"].T + params[f"{i}.bias"]
        elif kind == "conv":
            pad = layer[4]
            x = lax.conv_general_dilated(x, params[f"{i}.weight"], window_strides=(1, 1),
                                         padding=[(pad, pad), (pad, pad)],
                                         dimension_numbers=("NCHW", "OIHW", "NCHW"))
            x = x + params[f"{i}.bias"][None, :, None, None]
        elif kind == "avgpool":
            k = layer[1]
            x = lax.reduce_window(x, 0.0, lax.add, (1, 1, k, k), (1, 1, k, k), "VALID") / (k * k)
        elif kind == "flatten":
            x = x.reshape(x.shape[0], -1)
        else:
            x = jax.nn.relu(x) if kind == "relu" else jax.nn.sigmoid(x)
    return x


def inference_mode(job, case):
    params = {k: jnp.asarray(v) for k, v in job.weights(case.model).items()}
    x = jnp.asarray(job.input(case))
    fn = jax.jit(lambda params, x: forward(case.model, params, x))
    return runner.Mode("jit", "jax.jit", lambda: {"out": np.asarray(fn(params, x))},
                       lambda: fn(params, x).block_until_ready())


def training_mode(job, case):
    x, y = jnp.asarray(job.input(case)), jnp.asarray(job.target(case).astype(np.int32))

    def loss_fn(params, x, y):
        log_probs = jax.nn.log_softmax(forward(case.model, params, x))
        return -jnp.mean(jnp.take_along_axis(log_probs, y[:, None], axis=1))

    @jax.jit
    def train_step(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return loss, jax.tree_util.tree_map(lambda p, g: p - LEARNING_RATE * g, params, grads)

    state = {"params": {k: jnp.asarray(v) for k, v in job.weights(case.model).items()}}

    def step():
        loss, state["params"] = train_step(state["params"], x, y)
        return loss.block_until_ready()

    def outputs():
        losses = [float(step()) for _ in range(STEPS_CHECKED)]
        return runner.training_outputs(losses, {k: np.asarray(v)
                                                for k, v in state["params"].items()})
    return runner.Mode("jit", "jax.jit", outputs, step)


def build_modes(job, case):
    return [training_mode(job, case) if case.training else inference_mode(job, case)]


if __name__ == "__main__":
    runner.main("jax", lambda: {"jax": jax.__version__, "jaxlib": metadata.version("jaxlib")},
                build_modes)
