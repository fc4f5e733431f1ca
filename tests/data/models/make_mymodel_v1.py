"""Writes mymodel_v1.kiln: SCENARIOS.md section 6's MyModel (10 -> 5 -> 2),
traced at batch 10 with an example kept in the file. The file in git was
written on 2026-11-23 by model format version 1 (op schema 1); it is a test
input that later kiln versions must still load, so do not regenerate it: a
new format version gets a new file next to it."""
import sys

import kiln
from kiln import nn


class MyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 5)
        self.fc2 = nn.Linear(5, 2)

    def forward(self, x):
        return self.fc2(nn.functional.relu(self.fc1(x)))


kiln.manual_seed(2026)
model = MyModel().eval()
x = kiln.randn(10, 10)
kiln.jit.trace(model, x).save(sys.argv[1] if len(sys.argv) > 1 else "mymodel_v1.kiln")
