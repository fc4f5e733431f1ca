"""MXNet's runner (.bench/venv-mxnet: MXNet 1.9.1, which needs NumPy < 1.24):
Gluon eager and hybridized (net.hybridize(static_alloc=True,
static_shape=True), MXNet's fastest documented setting), OMP_NUM_THREADS =
the job's threads and one engine worker (MXNET_CPU_WORKER_NTHREADS=1).

The model is a gluon.nn.HybridSequential of Dense, Conv2D, AvgPool2D,
Flatten and Activation layers (PyTorch's layouts: Dense weights [out, in],
NCHW), holding the driver's weights through set_data. Inference runs
outside autograd.record() (no graph is recorded). A training step is
SoftmaxCrossEntropyLoss averaged over the batch inside autograd.record(),
backward, and gluon.Trainer's "sgd" (no momentum, no weight decay;
step(1), as the loss is already a mean). Every call ends with
wait_to_read(): MXNet's engine runs ops asynchronously.

    .bench/venv-mxnet/bin/python bench/harness/run_mxnet.py JOB.json   (started by bench/run_all.py)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import mxnet as mx  # noqa: E402
from mxnet import autograd, gluon, nd  # noqa: E402
from mxnet.gluon import nn  # noqa: E402

from harness import runner  # noqa: E402
from harness.workloads import LEARNING_RATE, MODELS, STEPS_CHECKED  # noqa: E402

MODES = [("eager", "MXNet Gluon eager", False), ("hybridize", "MXNet hybridize()", True)]


def build_net(model_name, weights, hybridize):
    """(net, {state_dict name: gluon Parameter}) holding `weights`."""
    net, params = nn.HybridSequential(), {}
    for i, layer in enumerate(MODELS[model_name]):
        kind = layer[0]
        if kind == "linear":
            block = nn.Dense(layer[2], in_units=layer[1])
        elif kind == "conv":
            block = nn.Conv2D(layer[2], kernel_size=layer[3], padding=layer[4],
                              in_channels=layer[1])
        elif kind == "avgpool":
            block = nn.AvgPool2D(pool_size=layer[1], strides=layer[1])
        elif kind == "flatten":
            block = nn.Flatten()
        else:
            block = nn.Activation(kind)
        net.add(block)
        if kind in ("linear", "conv"):
            params[f"{i}.weight"], params[f"{i}.bias"] = block.weight, block.bias
    net.initialize()
    for name, param in params.items():
        param.set_data(nd.array(weights[name]))
    if hybridize:
        net.hybridize(static_alloc=True, static_shape=True)
    return net, params


def inference_modes(job, case):
    x = nd.array(job.input(case))
    modes = []
    for id, label, hybridize in MODES:
        net, _ = build_net(case.model, job.weights(case.model), hybridize)
        modes.append(runner.Mode(id, label, lambda net=net: {"out": net(x).asnumpy()},
                                 lambda net=net: net(x).wait_to_read()))
    return modes


def training_modes(job, case):
    x, y = nd.array(job.input(case)), nd.array(job.target(case), dtype="float32")
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    modes = []
    for id, label, hybridize in MODES:
        net, params = build_net(case.model, job.weights(case.model), hybridize)
        trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": LEARNING_RATE})

        def step(net=net, trainer=trainer):
            with autograd.record():
                loss = loss_fn(net(x), y).mean()
            loss.backward()
            trainer.step(1)
            loss.wait_to_read()
            return loss

        def outputs(step=step, params=params):
            losses = [step().asscalar() for _ in range(STEPS_CHECKED)]
            return runner.training_outputs(losses, {k: p.data().asnumpy()
                                                    for k, p in params.items()})
        modes.append(runner.Mode(id, label, outputs, step))
    return modes


def build_modes(job, case):
    return training_modes(job, case) if case.training else inference_modes(job, case)


if __name__ == "__main__":
    runner.main("mxnet", lambda: {"mxnet": mx.__version__}, build_modes)
