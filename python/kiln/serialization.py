"""kiln.save / kiln.load: state dicts as safetensors files.

    kiln.save(model.state_dict(), "model.safetensors")
    model.load_state_dict(kiln.load("model.safetensors"))

The file is in the safetensors layout, so the `safetensors` package (and the
libraries built on it) reads kiln's weights, and kiln reads theirs. Unlike
torch.save, only a mapping of names to tensors can be saved: the format holds
tensors, never pickled Python objects, so loading a file cannot run code.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal, overload

from kiln import _C
from kiln._C import Tensor


def save(obj: Mapping[str, Tensor], path: str | os.PathLike[str],
         metadata: Mapping[str, str] | None = None) -> None:
    """Writes `obj` (a dict of name -> tensor, such as a state_dict) to
    `path`. metadata: an optional dict of str -> str kept in the header."""
    if not isinstance(obj, dict):
        raise TypeError(f"kiln.save writes a dict of tensors (a state_dict), not a "
                        f"{type(obj).__name__}")
    items = []
    for name, tensor in obj.items():
        if not isinstance(name, str) or not isinstance(tensor, _C.Tensor):
            raise TypeError(f"kiln.save: every key must be a str and every value a tensor; "
                            f"got {type(name).__name__} -> {type(tensor).__name__}")
        items.append((name, tensor.detach()))
    _C.io.save_safetensors(items, os.fspath(path), dict(metadata or {}))


# load's overloads are for type checkers only: typing.overload's registry would
# keep this module's globals, kiln._C's objects among them, alive past
# interpreter shutdown (nanobind then reports them as leaked).
if TYPE_CHECKING:
    @overload
    def load(path: str | os.PathLike[str],
             with_metadata: Literal[False] = False) -> dict[str, Tensor]: ...

    @overload
    def load(path: str | os.PathLike[str],
             with_metadata: Literal[True]) -> tuple[dict[str, Tensor], dict[str, str]]: ...


def load(path: str | os.PathLike[str], with_metadata: bool = False
         ) -> dict[str, Tensor] | tuple[dict[str, Tensor], dict[str, str]]:
    """Reads a safetensors file into a dict of name -> tensor (in the file's
    order). Aligned tensors are views of the file, mapped copy-on-write: no
    copy is made until one is written. with_metadata: return (dict, metadata)."""
    tensors, metadata = _C.io.load_safetensors(os.fspath(path))
    state = dict(tensors)
    return (state, metadata) if with_metadata else state
