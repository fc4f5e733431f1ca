"""kiln's runner from Python (main .venv).

Inference (eval mode): eager with grad recording on, eager under
kiln.no_grad(), hybridized (model.hybridize(), then model(x)), traced
(kiln.jit.trace(model, x), then traced(x)), and the traced graph called from
a C++ loop (kiln._C.jit._seconds_per_call_from_cpp: no Python in the loop,
as bench/hybrid_python.py times it).
Training step: eager (kiln.optim.SGD's zero_grad, cross_entropy, backward,
step); the hybridized model in the same loop (compiled forward and backward
graphs, the update eager); kiln.compile(step) of the whole step (one graph:
forward, loss, backward, SGD update in place); and that step's graph called
from a C++ loop. A step that computes other losses or weights than
PyTorch's shows as a mismatch in the table.

    .venv/bin/python bench/harness/run_kiln.py JOB.json   (started by bench/run_all.py)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import kiln  # noqa: E402
import kiln.jit  # noqa: E402
from harness import runner  # noqa: E402
from harness.workloads import LEARNING_RATE, MODELS, STEPS_CHECKED  # noqa: E402
from kiln import nn  # noqa: E402


def build_model(model_name, weights):
    layers = []
    for layer in MODELS[model_name]:
        kind = layer[0]
        if kind == "linear":
            layers.append(nn.Linear(layer[1], layer[2]))
        elif kind == "conv":
            layers.append(nn.Conv2d(layer[1], layer[2], kernel_size=layer[3], padding=layer[4]))
        elif kind == "avgpool":
            layers.append(nn.AvgPool2d(kernel_size=layer[1], stride=layer[1]))
        else:
            layers.append({"relu": nn.ReLU, "sigmoid": nn.Sigmoid, "flatten": nn.Flatten}[kind]())
    model = nn.Sequential(*layers)
    model.load_state_dict(weights)
    return model


def _numpy(t):
    return t.detach().numpy().copy()


def inference_modes(job, case):
    weights, x = job.weights(case.model), kiln.tensor(job.input(case))

    def mode(id, label, fn, context=kiln.no_grad):
        def outputs():
            with context():
                return {"out": _numpy(fn(x))}

        def step():
            with context():
                fn(x)
        return runner.Mode(id, label, outputs, step)

    eager = build_model(case.model, weights).eval()
    hybrid = build_model(case.model, weights).eval().hybridize()
    traced = {}

    def traced_outputs():
        with kiln.no_grad():
            traced["fn"] = kiln.jit.trace(build_model(case.model, weights).eval(), x)
            return {"out": _numpy(traced["fn"](x))}

    def traced_step():
        with kiln.no_grad():
            traced["fn"](x)

    def cpp_loop_outputs():
        with kiln.no_grad():
            traced["cpp"] = kiln.jit.trace(build_model(case.model, weights).eval(), x)._compiled
            return {"out": _numpy(traced["cpp"].run([x])[0])}

    def cpp_loop(calls):
        with kiln.no_grad():
            return kiln._C.jit._seconds_per_call_from_cpp(traced["cpp"], [x], calls) * 1e6

    return [mode("eager-grad", "kiln eager (grad)", eager, kiln.enable_grad),
            mode("eager", "kiln eager", eager),
            mode("hybridize", "kiln hybridize()", hybrid),
            runner.Mode("jit-trace", "kiln jit.trace", traced_outputs, traced_step),
            runner.Mode("cpp-loop", "kiln compiled, C++ loop", cpp_loop_outputs,
                        timer=cpp_loop)]


def new_training(case, weights, hybridize=False):
    """A fresh model in training mode, its SGD optimizer, and the eager step."""
    model = build_model(case.model, weights).train()
    if hybridize:
        model.hybridize()
    opt = kiln.optim.SGD(model.parameters(), lr=LEARNING_RATE)

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return model, step


def checked_training(model, first_loss, next_loss):
    losses = [first_loss] + [next_loss() for _ in range(STEPS_CHECKED - 1)]
    return runner.training_outputs(losses, {k: _numpy(v) for k, v in model.state_dict().items()})


def training_mode(job, case, id, label, compile_step=False, hybridize=False):
    weights = job.weights(case.model)
    x, y = kiln.tensor(job.input(case)), kiln.tensor(job.target(case))
    state = {}

    def outputs():
        model, step = new_training(case, weights, hybridize)
        state["step"] = kiln.compile(step) if compile_step else step
        return checked_training(model, state["step"](x, y).item(),
                                lambda: state["step"](x, y).item())
    return runner.Mode(id, label, outputs, lambda: state["step"](x, y))


def training_modes(job, case):
    modes = [training_mode(job, case, "eager", "kiln eager"),
             training_mode(job, case, "hybridize", "kiln hybridize()", hybridize=True)]
    if hasattr(kiln, "compile"):
        modes.append(training_mode(job, case, "compile", "kiln.compile(step)", compile_step=True))
    else:
        modes.append(runner.Mode("compile", "kiln.compile(step)",
                                 unavailable="kiln.compile is not in this kiln"))
    modes.append(compiled_step_from_cpp(job, case))
    return modes


def compiled_step_from_cpp(job, case):
    """The graph kiln.compile(step) records, run from a C++ loop: the same
    recording (kiln.jit._record.record with the step's weights and optimizer
    state bound by reference), then no Python per call."""
    from kiln.jit import _record
    weights = job.weights(case.model)
    x, y = kiln.tensor(job.input(case)), kiln.tensor(job.target(case))
    state = {}

    def outputs():
        model, step = new_training(case, weights)
        options = dict(optimize=True, frozen=False, fast_math=False, passes=[])
        compiled, first, _ = _record.record(step, (x, y), [], False, options,
                                            bind_outside_state=True)
        state["compiled"] = compiled
        return checked_training(model, first.item(), lambda: compiled.run([x, y])[0].item())

    def timer(calls):
        return kiln._C.jit._seconds_per_call_from_cpp(state["compiled"], [x, y], calls) * 1e6
    return runner.Mode("cpp-loop", "kiln compiled, C++ loop", outputs, timer=timer)


def build_modes(job, case):
    return training_modes(job, case) if case.training else inference_modes(job, case)


if __name__ == "__main__":
    runner.main("kiln", lambda: {"kiln": kiln.__version__}, build_modes)
