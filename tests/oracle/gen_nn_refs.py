"""PyTorch's answers for kiln::nn: python gen_nn_refs.py OUT.json

Module rows name a torch.nn class and its constructor kwargs; the C++ test
(tests/cpp/nn_refs_test.cpp) builds the kiln module from the same kwargs,
loads the PyTorch module's state_dict (so the keys and their order are
checked too), runs forward and compares the output and, for training-mode
batch norm, the updated buffers. Loss rows name a torch.nn.functional loss,
its kwargs and tensors; they carry the loss and its gradient w.r.t. input.
Recurrent rows (tests/cpp/nn_rnn_test.cpp) name an RNN, LSTM, GRU or cell,
optionally with initial states; they carry the outputs, the final states
and the gradients w.r.t. the input, the initial states and every parameter.
"""
from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def encode(t: torch.Tensor) -> dict:
    arr = t.detach().numpy()
    flat = arr.reshape(-1)
    if np.issubdtype(arr.dtype, np.integer):
        data = [int(v) for v in flat]
    else:  # JSON has no nan/inf, so they travel as strings
        data = [float(v) if np.isfinite(v) else str(float(v)) for v in flat]
    return {"dtype": str(arr.dtype), "shape": list(arr.shape), "data": data}


def M(ctor, input_shape, train=False, ints=None, **kwargs):
    """A module row; `ints` = (low, high) makes an int64 input (Embedding)."""
    return {"ctor": ctor, "kwargs": kwargs, "input_shape": list(input_shape), "train": train,
            "ints": ints}


def child(ctor, **kwargs):
    return {"ctor": ctor, "kwargs": kwargs}


MODULES = {
    "linear": M("Linear", (4, 5), in_features=5, out_features=3),
    "linear_no_bias_3d": M("Linear", (2, 3, 5), in_features=5, out_features=2, bias=False),
    "conv2d": M("Conv2d", (2, 3, 8, 8), in_channels=3, out_channels=4, kernel_size=3),
    "conv2d_all_options": M("Conv2d", (2, 4, 9, 9), in_channels=4, out_channels=6,
                            kernel_size=[3, 2], stride=2, padding=1, dilation=[1, 2], groups=2,
                            bias=False),
    "relu": M("ReLU", (3, 4)),
    "sigmoid": M("Sigmoid", (3, 4)),
    "tanh": M("Tanh", (3, 4)),
    "gelu": M("GELU", (3, 4)),
    "gelu_tanh": M("GELU", (3, 4), approximate="tanh"),
    "leaky_relu": M("LeakyReLU", (3, 4), negative_slope=0.2),
    "max_pool": M("MaxPool2d", (2, 3, 6, 6), kernel_size=2),
    "max_pool_options": M("MaxPool2d", (2, 3, 7, 7), kernel_size=3, stride=2, padding=1,
                          ceil_mode=True),
    "avg_pool": M("AvgPool2d", (2, 3, 6, 6), kernel_size=2),
    "avg_pool_options": M("AvgPool2d", (2, 3, 7, 7), kernel_size=3, stride=2, padding=1,
                          ceil_mode=True, count_include_pad=False),
    "adaptive_avg_pool": M("AdaptiveAvgPool2d", (2, 3, 7, 5), output_size=[3, 2]),
    "flatten": M("Flatten", (2, 3, 4, 5)),
    "flatten_range": M("Flatten", (2, 3, 4, 5), start_dim=0, end_dim=2),
    "dropout_eval": M("Dropout", (3, 4), p=0.5),
    "softmax": M("Softmax", (3, 4), dim=1),
    "log_softmax": M("LogSoftmax", (3, 4, 2), dim=-1),
    "batch_norm1d_eval": M("BatchNorm1d", (8, 4), num_features=4),
    "batch_norm1d_train_3d": M("BatchNorm1d", (8, 4, 3), train=True, num_features=4),
    "batch_norm2d_train": M("BatchNorm2d", (4, 3, 5, 5), train=True, num_features=3,
                            momentum=0.3),
    "batch_norm2d_cumulative": M("BatchNorm2d", (4, 3, 5, 5), train=True, num_features=3,
                                 momentum=None),
    "batch_norm2d_eval": M("BatchNorm2d", (4, 3, 5, 5), num_features=3, eps=1e-3),
    "batch_norm2d_no_stats_eval": M("BatchNorm2d", (4, 3, 5, 5), num_features=3, affine=False,
                                    track_running_stats=False),
    "layer_norm": M("LayerNorm", (3, 4), normalized_shape=[4]),
    "layer_norm_2d_no_affine": M("LayerNorm", (2, 3, 4), normalized_shape=[3, 4],
                                 elementwise_affine=False),
    "layer_norm_no_bias": M("LayerNorm", (3, 4), normalized_shape=[4], bias=False, eps=1e-3),
    "embedding": M("Embedding", (2, 5), ints=(0, 10), num_embeddings=10, embedding_dim=3),
    "embedding_padding": M("Embedding", (7,), ints=(0, 6), num_embeddings=6, embedding_dim=4,
                           padding_idx=-2),
    "sequential_mlp": M("Sequential", (3, 6), children=[
        child("Linear", in_features=6, out_features=5), child("ReLU"),
        child("Linear", in_features=5, out_features=2)]),
    "sequential_lenet_train": M("Sequential", (2, 1, 12, 12), train=True, children=[
        child("Conv2d", in_channels=1, out_channels=4, kernel_size=5),
        child("BatchNorm2d", num_features=4), child("ReLU"), child("MaxPool2d", kernel_size=2),
        child("Flatten"), child("Linear", in_features=64, out_features=10),
        child("LogSoftmax", dim=1)]),
}


def build(spec) -> nn.Module:
    kwargs = dict(spec["kwargs"])
    if spec["ctor"] == "Sequential":
        return nn.Sequential(*[build(c) for c in kwargs["children"]])
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()}
    return getattr(nn, spec["ctor"])(**kwargs)


def randomize(module: nn.Module) -> None:
    """Parameters and running statistics away from their defaults, so a wrong
    key or a buffer that is ignored changes the output."""
    with torch.no_grad():
        for name, t in module.state_dict().items():
            if name.endswith("num_batches_tracked"):
                t.fill_(3)
            elif name.endswith("running_var"):
                t.uniform_(0.5, 1.5)
            elif t.is_floating_point():
                t.copy_(torch.randn_like(t) * 0.5)


def module_row(row_id: str, spec: dict) -> dict:
    module = build(spec)
    randomize(module)
    module.train(spec["train"])
    if spec["ints"]:
        x = torch.randint(*spec["ints"], spec["input_shape"])
    else:
        x = torch.randn(spec["input_shape"])
    state = [[k, encode(v)] for k, v in module.state_dict().items()]
    with torch.no_grad():
        y = module(x)
    return {"id": row_id, "ctor": spec["ctor"], "kwargs": spec["kwargs"], "train": spec["train"],
            "input": encode(x), "state": state, "output": encode(y),
            "state_after": [[k, encode(v)] for k, v in module.state_dict().items()]}


def R(ctor, input_shape, state=False, train=False, **kwargs):
    """A recurrent row; `state`: pass initial states (h0, or (h0, c0))."""
    return {"ctor": ctor, "kwargs": kwargs, "input_shape": list(input_shape), "state": state,
            "train": train}


RECURRENT = {
    "rnn": R("RNN", (5, 3, 4), input_size=4, hidden_size=6),
    "rnn_relu_stacked_bidirectional": R("RNN", (3, 5, 4), state=True, input_size=4,
                                        hidden_size=3, num_layers=2, nonlinearity="relu",
                                        batch_first=True, bidirectional=True),
    "lstm": R("LSTM", (5, 3, 4), input_size=4, hidden_size=6),
    "lstm_state_no_bias": R("LSTM", (4, 2, 3), state=True, input_size=3, hidden_size=5,
                            bias=False),
    "lstm_stacked_bidirectional_train": R("LSTM", (2, 6, 3), train=True, input_size=3,
                                          hidden_size=4, num_layers=2, batch_first=True,
                                          bidirectional=True),
    "lstm_unbatched_state": R("LSTM", (6, 3), state=True, input_size=3, hidden_size=4,
                              num_layers=2),
    "gru": R("GRU", (5, 3, 4), input_size=4, hidden_size=6),
    "gru_stacked_bidirectional_state": R("GRU", (4, 2, 3), state=True, input_size=3,
                                         hidden_size=5, num_layers=3, bidirectional=True),
    "rnn_cell": R("RNNCell", (3, 4), state=True, input_size=4, hidden_size=5),
    "rnn_cell_relu_unbatched": R("RNNCell", (4,), input_size=4, hidden_size=5,
                                 nonlinearity="relu", bias=False),
    "lstm_cell": R("LSTMCell", (3, 4), state=True, input_size=4, hidden_size=5),
    "lstm_cell_no_state": R("LSTMCell", (3, 4), input_size=4, hidden_size=5, bias=False),
    "gru_cell": R("GRUCell", (3, 4), state=True, input_size=4, hidden_size=5),
    "gru_cell_unbatched": R("GRUCell", (4,), state=True, input_size=4, hidden_size=5),
}


def recurrent_row(row_id: str, spec: dict) -> dict:
    """Forward and backward of one module; the upstream gradients are random."""
    module = getattr(nn, spec["ctor"])(**spec["kwargs"])
    module.train(spec["train"])
    kw = spec["kwargs"]
    cell = spec["ctor"].endswith("Cell")
    lstm = spec["ctor"].startswith("LSTM")
    x = torch.randn(spec["input_shape"], requires_grad=True)
    states = []
    if spec["state"]:
        batch = [] if len(spec["input_shape"]) == (1 if cell else 2) else \
            [spec["input_shape"][0 if cell or kw.get("batch_first") else 1]]
        lead = [] if cell else [kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)]
        states = [torch.randn(lead + batch + [kw["hidden_size"]], requires_grad=True)
                  for _ in range(2 if lstm else 1)]
    hx = None if not states else (tuple(states) if lstm else states[0])
    result = module(x, hx)
    if cell:
        results = list(result) if lstm else [result]
    else:
        results = [result[0]] + (list(result[1]) if lstm else [result[1]])
    seeds = [torch.randn(r.shape) for r in results]
    params = list(module.named_parameters())
    grads = torch.autograd.grad(results, [x] + states + [p for _, p in params], seeds)
    row = {"id": row_id, "ctor": spec["ctor"], "kwargs": kw, "train": spec["train"],
           "input": encode(x), "states": [encode(t) for t in states],
           "state": [[k, encode(v)] for k, v in module.state_dict().items()],
           "results": [encode(r) for r in results], "seeds": [encode(t) for t in seeds],
           "input_grad": encode(grads[0]),
           "state_grads": [encode(g) for g in grads[1:1 + len(states)]],
           "param_grads": [[name, encode(g)] for (name, _), g in
                           zip(params, grads[1 + len(states):])]}
    return row


def L(fn, input_shape, target, weight=None, pos_weight=None, log_probs=False, **kwargs):
    """A loss row. target: ("classes", shape, C, ignored_positions) |
    ("probs", shape) | ("normal", shape) | ("binary", shape)."""
    return {"fn": fn, "input_shape": input_shape, "target": target, "weight": weight,
            "pos_weight": pos_weight, "log_probs": log_probs, "kwargs": kwargs}


def loss_rows() -> dict:
    rows = {}
    classes = ("classes", [6], 4, [])
    ignored = ("classes", [6], 4, [1, 4])
    spatial = ("classes", [3, 2, 2], 4, [0, 5])
    probs = ("probs", [6, 4])
    for red in ("mean", "sum", "none"):
        r = {"reduction": red}
        rows[f"ce_{red}"] = L("cross_entropy", [6, 4], classes, **r)
        rows[f"ce_weight_{red}"] = L("cross_entropy", [6, 4], classes, weight=[4], **r)
        rows[f"ce_ignore_{red}"] = L("cross_entropy", [6, 4], ignored, weight=[4], **r)
        rows[f"ce_ignore_2_{red}"] = L("cross_entropy", [6, 4], ("classes", [6], 4, [0, 2, 3]),
                                       ignore_index=2, **r)
        rows[f"ce_smooth_{red}"] = L("cross_entropy", [6, 4], ignored, label_smoothing=0.1, **r)
        rows[f"ce_smooth_weight_{red}"] = L("cross_entropy", [6, 4], ignored, weight=[4],
                                            label_smoothing=0.25, **r)
        rows[f"ce_spatial_{red}"] = L("cross_entropy", [3, 4, 2, 2], spatial, weight=[4],
                                      label_smoothing=0.2, **r)
        rows[f"ce_probs_{red}"] = L("cross_entropy", [6, 4], probs, **r)
        rows[f"ce_probs_smooth_weight_{red}"] = L("cross_entropy", [6, 4], probs, weight=[4],
                                                  label_smoothing=0.3, **r)
        rows[f"ce_probs_spatial_{red}"] = L("cross_entropy", [2, 3, 2], ("probs", [2, 3, 2]), **r)
        rows[f"ce_unbatched_{red}"] = L("cross_entropy", [4], ("classes", [], 4, []), **r)
        rows[f"nll_{red}"] = L("nll_loss", [6, 4], classes, log_probs=True, **r)
        rows[f"nll_weight_ignore_{red}"] = L("nll_loss", [6, 4], ignored, weight=[4],
                                             log_probs=True, **r)
        rows[f"nll_spatial_{red}"] = L("nll_loss", [3, 4, 2, 2], spatial, log_probs=True, **r)
        rows[f"mse_{red}"] = L("mse_loss", [3, 4], ("normal", [3, 4]), **r)
        rows[f"l1_{red}"] = L("l1_loss", [3, 4], ("normal", [3, 4]), **r)
        rows[f"bce_{red}"] = L("binary_cross_entropy_with_logits", [4, 3], ("binary", [4, 3]), **r)
        rows[f"bce_weights_{red}"] = L("binary_cross_entropy_with_logits", [4, 3],
                                       ("probs_any", [4, 3]), weight=[3], pos_weight=[3], **r)
    rows["ce_all_ignored_mean"] = L("cross_entropy", [3, 4], ("classes", [3], 4, [0, 1, 2]))
    rows["bce_large_logits"] = L("binary_cross_entropy_with_logits", [8], ("binary", [8]),
                                 scale=40.0, reduction="none")
    return rows


def make_target(target) -> torch.Tensor:
    kind, shape = target[0], target[1]
    if kind == "classes":
        t = torch.randint(0, target[2], shape)
        flat = t.view(-1)
        for pos in target[3]:
            flat[pos] = -100
        return t
    if kind == "probs":
        return torch.softmax(torch.randn(shape), dim=1 if len(shape) > 1 else 0)
    if kind == "probs_any":
        return torch.rand(shape)
    if kind == "binary":
        return torch.randint(0, 2, shape).float()
    return torch.randn(shape)


def loss_row(row_id: str, spec: dict) -> dict:
    kwargs = dict(spec["kwargs"])
    scale = kwargs.pop("scale", 1.0)
    x = torch.randn(spec["input_shape"]) * scale
    if spec["log_probs"]:
        x = torch.log_softmax(x, dim=1)
    target = make_target(spec["target"])
    ignore_index = kwargs.get("ignore_index", -100)
    if ignore_index != -100:  # rows with their own ignore_index mark those positions with it
        target[target == -100] = ignore_index
    tensors = {}
    if spec["weight"]:
        tensors["weight"] = torch.rand(spec["weight"]) + 0.5
    if spec["pos_weight"]:
        tensors["pos_weight"] = torch.rand(spec["pos_weight"]) * 3
    x.requires_grad_(True)
    out = getattr(F, spec["fn"])(x, target, **tensors, **kwargs)
    (grad,) = torch.autograd.grad(out.sum(), x)
    return {"id": row_id, "fn": spec["fn"], "kwargs": kwargs, "input": encode(x),
            "target": encode(target), **{k: encode(v) for k, v in tensors.items()},
            "output": encode(out), "input_grad": encode(grad)}


def main() -> None:
    out = pathlib.Path(sys.argv[1])
    torch.manual_seed(0)
    modules = [module_row(k, v) for k, v in MODULES.items()]
    losses = [loss_row(k, v) for k, v in loss_rows().items()]
    recurrent = [recurrent_row(k, v) for k, v in RECURRENT.items()]
    out.write_text(json.dumps({"torch_version": torch.__version__, "modules": modules,
                               "losses": losses, "recurrent": recurrent}))
    print(f"wrote {len(modules)} module and {len(losses)} loss cases to {out}")


if __name__ == "__main__":
    main()
