"""The op test table's vocabulary: input specs, cases, and how a case is run
in PyTorch (the oracle) and written out for the C++ tests.

A case names a kiln op, its inputs and attributes, and the PyTorch function
that computes the same thing. gen_refs.py runs every case in PyTorch and
writes inputs and expected outputs (or the expected error) to a JSON file
that tests/cpp/op_table_test.cpp replays through kiln's dispatch.
"""
from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

NP_DTYPES = {
    "float32": np.float32,
    "float64": np.float64,
    "int8": np.int8,
    "uint8": np.uint8,
    "int16": np.int16,
    "int32": np.int32,
    "int64": np.int64,
    "bool": np.bool_,
}

# Layouts a kiln input can be built in; the values are the same, only the
# strides differ, so non-contiguous kernels get exercised.
LAYOUTS = ("contiguous", "transposed", "strided", "expanded")


@dataclasses.dataclass
class Input:
    """How to make one input: a generator of values plus dtype and layout."""
    shape: tuple
    dtype: str = "float32"
    kind: str = "normal"  # normal | uniform | ints | bools | values | absent
    low: float = 0.0
    high: float = 1.0
    values: Any = None
    layout: str = "contiguous"
    wrapped: bool = False  # a Python number (x + 2.5), a 0-d "wrapped" tensor
    requires_grad: bool = True  # participates in gradient checks (floating only)

    def make(self, rng: np.random.RandomState) -> np.ndarray | None:
        made = self._make(rng)
        return None if made is None else np.array(made, dtype=NP_DTYPES[self.dtype])

    def _make(self, rng: np.random.RandomState) -> np.ndarray | None:
        if self.kind == "absent":
            return None
        if self.layout == "expanded" and self.kind != "values":
            # An expanded input repeats one row along dim 0 (stride 0 there).
            row = dataclasses.replace(self, shape=self.shape[1:], layout="contiguous").make(rng)
            return np.ascontiguousarray(np.broadcast_to(row, self.shape))
        dt = NP_DTYPES[self.dtype]
        if self.kind == "values":
            return np.array(self.values, dtype=dt).reshape(self.shape)
        if self.kind == "normal":
            return rng.standard_normal(self.shape).astype(dt)
        if self.kind == "uniform":
            return rng.uniform(self.low, self.high, self.shape).astype(dt)
        if self.kind == "ints":
            return rng.randint(int(self.low), int(self.high), self.shape).astype(dt)
        if self.kind == "bools":
            return (rng.uniform(0, 1, self.shape) > 0.5).astype(dt)
        raise ValueError(f"unknown input kind {self.kind}")


def randn(*shape, dtype="float32", layout="contiguous"):
    return Input(tuple(shape), dtype, "normal", layout=layout)


def uniform(low, high, *shape, dtype="float32", layout="contiguous"):
    return Input(tuple(shape), dtype, "uniform", low, high, layout=layout)


def ints(low, high, *shape, dtype="int64", layout="contiguous"):
    return Input(tuple(shape), dtype, "ints", low, high, layout=layout)


def bools(*shape, layout="contiguous"):
    return Input(tuple(shape), "bool", "bools", layout=layout)


def values(vals, dtype="float32", shape=None, layout="contiguous"):
    arr = np.array(vals)
    return Input(tuple(arr.shape if shape is None else shape), dtype, "values", values=vals,
                 layout=layout)


def number(value):
    """A Python scalar operand: float -> float64 kind, int -> int64, bool -> bool."""
    dtype = "bool" if isinstance(value, bool) else "int64" if isinstance(value, int) else "float64"
    return Input((), dtype, "values", values=value, wrapped=True)


def absent():
    return Input((), kind="absent")


@dataclasses.dataclass
class Case:
    op: str
    inputs: Sequence[Input]
    torch_fn: Callable | None = None  # (torch tensors..., **attrs) -> tensor | tuple
    attrs: dict = dataclasses.field(default_factory=dict)
    name: str = ""
    rtol: float | None = None
    atol: float | None = None
    reduce_len: int = 1  # scales atol, as a sum over n terms accumulates n roundings
    error: str | None = None  # expected substring of kiln's error message
    # kiln outputs to compare (some ops return extra outputs PyTorch does not)
    compare_outputs: Sequence[int] | None = None
    grad: bool = True  # check gradients against PyTorch (floating inputs and outputs only)
    fd: bool = True  # also check them by float64 finite differences (off at kinks, ties)

    def case_id(self) -> str:
        return f"{self.op}/{self.name}" if self.name else self.op

    def seed(self) -> int:
        return zlib.crc32(self.case_id().encode())


def default_tolerances(dtypes: Sequence[str], reduce_len: int):
    if "float32" in dtypes:
        return 1.3e-6, 1e-5 * max(1, reduce_len) ** 0.5
    if "float64" in dtypes:
        return 1e-7, 1e-7 * max(1, reduce_len) ** 0.5
    return 0.0, 0.0
