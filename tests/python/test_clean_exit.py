"""A program that uses kiln exits without nanobind's "leaked instances"
report: kiln keeps no reference to Python objects past the interpreter."""
import subprocess
import sys

PROGRAM = """
import numpy as np
import kiln
x = kiln.ones(2, 3)
y = x + np.ones((2, 3)) + np.float32(2.0)
z = np.ones((2, 3)) * x
model = kiln.nn.Linear(3, 2)
model(y).sum().backward()
print(float(z.sum()))
"""


def test_a_kiln_program_exits_without_a_leak_report():
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "6.0"
    assert "leaked" not in done.stderr, done.stderr
