"""PyTorch's runner (main .venv): eager with grad recording on and under
torch.no_grad(), torch.jit.script, torch.jit.trace and torch.compile (default
mode, inductor). Inference runs in eval mode under no_grad, except "eager
(grad)", which records the backward graph as a user's plain call does.
A training step is torch.optim.SGD's zero_grad, F.cross_entropy, backward,
step; the scripted, traced and compiled variants compile the model (what
torch.compile and TorchScript compile: the optimizer step stays eager).

    .venv/bin/python bench/harness/run_torch.py JOB.json   (started by bench/run_all.py)
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch  # noqa: E402

from harness import runner  # noqa: E402
from harness.workloads import LEARNING_RATE, MODELS, STEPS_CHECKED  # noqa: E402


def build_model(model_name, weights=None):
    """The model as an nn.Sequential, holding `weights` (a state_dict of
    NumPy arrays), or PyTorch's default initialization when None."""
    layers = []
    for layer in MODELS[model_name]:
        kind = layer[0]
        if kind == "linear":
            layers.append(torch.nn.Linear(layer[1], layer[2]))
        elif kind == "conv":
            layers.append(torch.nn.Conv2d(layer[1], layer[2], kernel_size=layer[3],
                                          padding=layer[4]))
        elif kind == "avgpool":
            layers.append(torch.nn.AvgPool2d(kernel_size=layer[1], stride=layer[1]))
        else:
            layers.append({"relu": torch.nn.ReLU, "sigmoid": torch.nn.Sigmoid,
                           "flatten": torch.nn.Flatten}[kind]())
    model = torch.nn.Sequential(*layers)
    if weights is not None:
        model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
    return model


def compilers():
    """(mode id, label, model -> compiled model given an example input)."""
    return [("jit-script", "torch.jit.script", lambda m, x: torch.jit.script(m)),
            ("jit-trace", "torch.jit.trace", lambda m, x: torch.jit.trace(m, x)),
            ("compile", "torch.compile", lambda m, x: torch.compile(m))]


def inference_modes(job, case):
    weights, x = job.weights(case.model), torch.from_numpy(job.input(case))
    model = build_model(case.model, weights).eval()

    def mode(id, label, fn, context):
        def outputs():
            with context():
                return {"out": fn(x).detach().numpy().copy()}

        def step():
            with context():
                fn(x)
        return runner.Mode(id, label, outputs, step)

    modes = [mode("eager-grad", "PyTorch eager (grad)", model, torch.enable_grad),
             mode("eager", "PyTorch eager", model, torch.no_grad)]
    def compiled_mode(id, label, compile_model):
        # Compiled inside outputs(), so that a compiler failure fails only
        # this mode, and the compile time is reported.
        state = {}

        def outputs():
            start = time.perf_counter()
            with torch.no_grad():
                fn = compile_model(build_model(case.model, weights).eval(), x)
                state["mode"] = mode(id, label, fn, torch.no_grad)
                result = state["mode"].outputs()
            print(f"  torch: {case.id} {label} compiled and ran once in "
                  f"{time.perf_counter() - start:.1f} s", file=sys.stderr)
            return result
        return runner.Mode(id, label, outputs, lambda: state["mode"].step())

    return modes + [compiled_mode(*c) for c in compilers()]


def training_mode(job, case, id, label, compile_model=None):
    weights = job.weights(case.model)
    x, y = torch.from_numpy(job.input(case)), torch.from_numpy(job.target(case))
    state = {}

    def step():
        opt = state["opt"]
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(state["fn"](x), y)
        loss.backward()
        opt.step()
        return loss

    def outputs():
        model = build_model(case.model, weights).train()
        state["fn"] = compile_model(model, x) if compile_model else model
        state["opt"] = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
        losses = [step().item() for _ in range(STEPS_CHECKED)]
        return runner.training_outputs(losses, {k: v.detach().numpy().copy()
                                                for k, v in model.state_dict().items()})
    return runner.Mode(id, label, outputs, step)


def build_modes(job, case):
    torch.set_num_threads(job.threads)
    if not case.training:
        return inference_modes(job, case)
    return [training_mode(job, case, "eager", "PyTorch eager")] + [
        training_mode(job, case, id, label, compile_model)
        for id, label, compile_model in compilers()]


if __name__ == "__main__":
    runner.main("torch", lambda: {"torch": torch.__version__}, build_modes)
