"""Runs torch.optim and torch.optim.lr_scheduler on fixed parameters and
gradient sequences and writes what they do, for the C++ optimizer tests:
python gen_optim_refs.py OUT.json

Options use kiln's names (beta1/beta2 rather than betas; flags as 0/1).
A gradient of None skips that parameter for that step, as torch does."""
from __future__ import annotations

import json
import sys

import torch

STEPS = 5
SHAPES = [[3, 4], [5]]

OPTIMIZER_CASES = [
    ("sgd_plain", "SGD", {"lr": 0.1}),
    ("sgd_momentum", "SGD", {"lr": 0.1, "momentum": 0.9}),
    ("sgd_dampening_weight_decay", "SGD",
     {"lr": 0.05, "momentum": 0.8, "dampening": 0.3, "weight_decay": 0.01}),
    ("sgd_nesterov", "SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": 1, "weight_decay": 1e-3}),
    ("sgd_maximize", "SGD", {"lr": 0.1, "momentum": 0.5, "maximize": 1}),
    ("adam_default", "Adam", {"lr": 1e-2}),
    ("adam_weight_decay", "Adam", {"lr": 1e-2, "weight_decay": 0.1}),
    ("adam_amsgrad", "Adam", {"lr": 1e-2, "amsgrad": 1, "beta2": 0.9}),
    ("adam_small_beta1", "Adam", {"lr": 1e-2, "beta1": 0.3, "eps": 1e-6}),
    ("adam_maximize_decoupled", "Adam",
     {"lr": 1e-2, "maximize": 1, "weight_decay": 0.1, "decoupled_weight_decay": 1}),
    ("adamw", "AdamW", {"lr": 1e-2, "weight_decay": 0.1}),
    ("adamw_amsgrad", "AdamW", {"lr": 1e-2, "weight_decay": 0.05, "amsgrad": 1}),
    ("rmsprop_default", "RMSprop", {"lr": 1e-2}),
    ("rmsprop_centered_momentum", "RMSprop",
     {"lr": 1e-2, "alpha": 0.9, "momentum": 0.8, "centered": 1, "weight_decay": 0.1}),
    ("rmsprop_maximize", "RMSprop", {"lr": 1e-2, "momentum": 0.5, "maximize": 1, "eps": 1e-4}),
    ("adagrad_default", "Adagrad", {"lr": 0.1}),
    ("adagrad_decay", "Adagrad",
     {"lr": 0.1, "lr_decay": 0.05, "weight_decay": 0.1, "initial_accumulator_value": 0.5}),
    ("adadelta_default", "Adadelta", {"lr": 1.0}),
    ("adadelta_options", "Adadelta", {"lr": 0.5, "rho": 0.8, "eps": 1e-4, "weight_decay": 0.1,
                                      "maximize": 1}),
    ("adamax_default", "Adamax", {"lr": 2e-2}),
    ("adamax_weight_decay", "Adamax", {"lr": 2e-2, "beta1": 0.8, "weight_decay": 0.1}),
    ("nadam_default", "NAdam", {"lr": 2e-2}),
    ("nadam_decoupled", "NAdam",
     {"lr": 2e-2, "weight_decay": 0.1, "decoupled_weight_decay": 1, "momentum_decay": 0.01}),
    ("nadam_weight_decay", "NAdam", {"lr": 2e-2, "weight_decay": 0.1, "maximize": 1}),
    # beta2 0.9: rho_inf = 19, so the rectified branch (rho_t > 5) starts at step 4.
    ("radam_default", "RAdam", {"lr": 1e-2, "beta2": 0.9}),
    ("radam_decoupled", "RAdam",
     {"lr": 1e-2, "beta2": 0.9, "weight_decay": 0.1, "decoupled_weight_decay": 1}),
]

# Two groups: the second overrides some options.
GROUP_CASES = [
    ("sgd_groups", "SGD", {"lr": 0.1, "momentum": 0.9}, {"lr": 0.01, "nesterov": 1}),
    ("adam_groups", "Adam", {"lr": 1e-2}, {"lr": 1e-3, "weight_decay": 0.5}),
    ("rmsprop_groups", "RMSprop", {"lr": 1e-2}, {"lr": 1e-3, "centered": 1}),
]

FLAGS = ("nesterov", "amsgrad", "maximize", "centered", "decoupled_weight_decay")


def torch_options(kind: str, options: dict) -> dict:
    out = dict(options)
    if "beta1" in out or "beta2" in out:
        out["betas"] = (out.pop("beta1", 0.9), out.pop("beta2", 0.999))
    for flag in FLAGS:
        if flag in out:
            out[flag] = bool(out[flag])
    return out


def make_optimizer(kind: str, groups: list[dict]):
    cls = getattr(torch.optim, kind)
    defaults = torch_options(kind, groups[0]["options"])
    torch_groups = [
        {"params": g["params"], **torch_options(kind, g["options"])} for g in groups
    ]
    # Group 0's options are the constructor's defaults, which the other groups
    # override: the same contract as kiln's constructors.
    return cls(torch_groups, foreach=False, **defaults)


def flat(t: torch.Tensor) -> list[float]:
    return t.detach().reshape(-1).tolist()


def run_case(name, kind, group_options, dtype, seed) -> dict:
    gen = torch.Generator().manual_seed(seed)
    params = [torch.randn(s, generator=gen, dtype=dtype).requires_grad_() for s in SHAPES]
    init = [flat(p) for p in params]
    if len(group_options) == 1:
        groups = [{"params": params, "options": group_options[0]}]
    else:
        groups = [{"params": [params[0]], "options": group_options[0]},
                  {"params": [params[1]], "options": group_options[1]}]
    opt = make_optimizer(kind, groups)
    grads, after = [], []
    for step in range(STEPS):
        step_grads = []
        for i, p in enumerate(params):
            if step == 2 and i == 1:  # no gradient: skipped this step
                p.grad = None
                step_grads.append(None)
                continue
            g = torch.randn(p.shape, generator=gen, dtype=dtype)
            p.grad = g.clone()
            step_grads.append(flat(g))
        opt.step()
        grads.append(step_grads)
        after.append([flat(p) for p in params])
    # State by torch's names ("step" among them, a 0-d tensor); "updates"
    # is the number of steps that updated the parameter.
    state = {}
    for i, p in enumerate(params):
        s = opt.state.get(p, {})
        entry = {"buffers": {k: flat(v) for k, v in s.items() if v is not None},
                 "updates": sum(g[i] is not None for g in grads)}
        state[str(i)] = entry
    return {
        "name": f"{name}_{str(dtype).removeprefix('torch.')}",
        "optimizer": kind,
        "dtype": str(dtype).removeprefix("torch."),
        "shapes": SHAPES,
        "groups": [{"params": [next(i for i, q in enumerate(params) if q is p)
                               for p in g["params"]],
                    "options": g["options"]}
                   for g in groups],
        "init": init,
        "grads": grads,
        "after": after,
        "state": state,
    }


def scheduler_cases() -> list[dict]:
    cases = []
    specs = [
        ("step_lr", "StepLR", {"step_size": 3, "gamma": 0.5}, 10),
        ("cosine", "CosineAnnealingLR", {"T_max": 4, "eta_min": 1e-3}, 13),
        ("cosine_zero_min", "CosineAnnealingLR", {"T_max": 10}, 25),
    ]
    for name, kind, args, steps in specs:
        lrs = [0.1, 0.05]
        params = [torch.zeros(1, requires_grad=True) for _ in lrs]
        opt = torch.optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(params, lrs)])
        sched = getattr(torch.optim.lr_scheduler, kind)(opt, **args)
        history = [list(sched.get_last_lr())]
        for _ in range(steps):
            opt.step()
            sched.step()
            history.append(list(sched.get_last_lr()))
        cases.append({"name": name, "kind": kind, "args": args, "base_lrs": lrs,
                      "lrs": history})
    return cases


def main() -> None:
    out = sys.argv[1]
    cases = []
    seed = 0
    for dtype in (torch.float32, torch.float64):
        for name, kind, options in OPTIMIZER_CASES:
            cases.append(run_case(name, kind, [options], dtype, seed))
            seed += 1
        for name, kind, first, second in GROUP_CASES:
            cases.append(run_case(name, kind, [first, second], dtype, seed))
            seed += 1
    refs = {"torch": torch.__version__, "optimizers": cases, "schedulers": scheduler_cases()}
    with open(out, "w") as f:
        json.dump(refs, f)


if __name__ == "__main__":
    main()
