"""Writes the seed corpus of the model-file fuzzer (scripts/fuzz.sh): small
.kiln files that between them hold every part of the format (parameters,
constants stored as blobs, inline constants, state updates, examples,
metadata, several outputs). Rerun after a format change."""
import pathlib

import kiln
from kiln import nn

out = pathlib.Path(__file__).parent / "model_file"
out.mkdir(exist_ok=True)
kiln.manual_seed(0)

mlp = nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 2))
kiln.jit.trace(mlp, kiln.randn(2, 6)).save(out / "mlp.kiln")

conv_bn = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Sigmoid(),
                        nn.AvgPool2d(2), nn.Flatten(), nn.Linear(2 * 2 * 2, 3))
x = kiln.randn(2, 1, 6, 6)
kiln.jit.trace(conv_bn, x).save(out / "conv_bn_training.kiln")  # state updates
kiln.jit.trace(conv_bn.eval(), x, frozen=True, fast_math=True).save(out / "frozen.kiln")


def function(a, b):
    return kiln.tanh(a * 2.5 + kiln.tensor([1.0, -1.0, 0.5])), (a - b).sum(dim=0)


kiln.jit.trace(function, (kiln.randn(4, 3), kiln.randn(4, 3))).save(out / "function.kiln")
