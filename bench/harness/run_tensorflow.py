"""TensorFlow 2's runner (.bench/venv-tensorflow): eager, tf.function, and
tf.function(jit_compile=True) (XLA), intra-op threads = the job's threads,
inter-op 1 (set before the runtime starts).

The model is written with tf ops on tf.Variables holding the driver's
weights, as a TF2 user writes a model without Keras: Linear as
tf.matmul(x, W, transpose_b=True) + b (W in PyTorch's [out, in]), conv as
tf.nn.conv2d. TensorFlow's CPU convolutions take NHWC only: LeNet's input is
transposed to NHWC once, outside the timed calls, its kernels to HWIO, and
the activations back to NCHW before Flatten, so that the Linear layers see
PyTorch's order. A training step is a GradientTape around the forward and
the mean of sparse_softmax_cross_entropy_with_logits, then
v.assign_sub(lr * g) for each variable (plain SGD).

    .bench/venv-tensorflow/bin/python bench/harness/run_tensorflow.py JOB.json
        (started by bench/run_all.py)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tensorflow as tf  # noqa: E402

from harness import runner  # noqa: E402
from harness.workloads import LEARNING_RATE, MODELS, STEPS_CHECKED  # noqa: E402

_threads = int(os.environ.get("KILN_BENCH_THREADS", "1"))
tf.config.threading.set_intra_op_parallelism_threads(_threads)
tf.config.threading.set_inter_op_parallelism_threads(1)

COMPILERS = [("eager", "TensorFlow eager", lambda f: f),
             ("function", "tf.function", tf.function),
             ("function-xla", "tf.function(jit_compile=True)",
              lambda f: tf.function(f, jit_compile=True))]


def variables(model_name, weights):
    """{name: tf.Variable}; conv kernels in TensorFlow's HWIO layout."""
    out = {}
    for name, value in weights.items():
        if value.ndim == 4:
            value = value.transpose(2, 3, 1, 0)  # OIHW -> HWIO
        out[name] = tf.Variable(value, name=name.replace(".", "_"))
    return out


def torch_layout(value):
    """A variable's value in PyTorch's layout (HWIO kernels back to OIHW)."""
    return value.transpose(3, 2, 0, 1) if value.ndim == 4 else value


def forward(model_name, params, x):
    """x: [N, features], or NHWC for a conv model."""
    for i, layer in enumerate(MODELS[model_name]):
        kind = layer[0]
        if kind == "linear":
            x = tf.matmul(x, params[f"{i}.weight"], transpose_b=True) + params[f"{i}.bias"]
        elif kind == "conv":
            pad = layer[4]
            x = tf.nn.conv2d(x, params[f"{i}.weight"], strides=1,
                             padding=[[0, 0], [pad, pad], [pad, pad], [0, 0]])
            x = x + params[f"{i}.bias"]
        elif kind == "avgpool":
            x = tf.nn.avg_pool2d(x, ksize=layer[1], strides=layer[1], padding="VALID")
        elif kind == "flatten":
            x = tf.reshape(tf.transpose(x, [0, 3, 1, 2]), [tf.shape(x)[0], -1])
        else:
            x = tf.nn.relu(x) if kind == "relu" else tf.sigmoid(x)
    return x


def model_input(job, case):
    x = job.input(case)
    return tf.constant(x.transpose(0, 2, 3, 1) if x.ndim == 4 else x)


def inference_modes(job, case):
    x = model_input(job, case)
    modes = []
    for id, label, compile_fn in COMPILERS:
        params = variables(case.model, job.weights(case.model))
        fn = compile_fn(lambda x, params=params: forward(case.model, params, x))
        modes.append(runner.Mode(id, label, lambda fn=fn: {"out": fn(x).numpy()},
                                 lambda fn=fn: fn(x)))
    return modes


def training_modes(job, case):
    x, y = model_input(job, case), tf.constant(job.target(case))
    modes = []
    for id, label, compile_fn in COMPILERS:
        params = variables(case.model, job.weights(case.model))

        def train_step(x, y, params=params):
            with tf.GradientTape() as tape:
                logits = forward(case.model, params, x)
                loss = tf.reduce_mean(
                    tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
            names = list(params)
            grads = tape.gradient(loss, [params[n] for n in names])
            for name, grad in zip(names, grads):
                params[name].assign_sub(LEARNING_RATE * grad)
            return loss

        step = compile_fn(train_step)

        def outputs(step=step, params=params):
            losses = [float(step(x, y)) for _ in range(STEPS_CHECKED)]
            return runner.training_outputs(losses, {k: torch_layout(v.numpy())
                                                    for k, v in params.items()})
        modes.append(runner.Mode(id, label, outputs, lambda step=step: step(x, y)))
    return modes


def build_modes(job, case):
    return training_modes(job, case) if case.training else inference_modes(job, case)


if __name__ == "__main__":
    runner.main("tensorflow", lambda: {"tensorflow": tf.__version__}, build_modes)
