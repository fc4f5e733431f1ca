"""kiln.save / kiln.load: state dicts and checkpoints as safetensors files.

    kiln.save(model.state_dict(), "model.safetensors")
    model.load_state_dict(kiln.load("model.safetensors"))

    kiln.save({"epoch": 3, "model": model.state_dict(),
               "optimizer": opt.state_dict()}, "checkpoint.pt")
    checkpoint = kiln.load("checkpoint.pt")

The file is in the safetensors layout, so the `safetensors` package (and the
libraries built on it) reads kiln's weights, and kiln reads theirs. A flat
dict of name -> tensor is stored as exactly that. Anything else (nested
dicts, lists and tuples of tensors, numbers, strings, booleans and None, as
a training checkpoint holds) is stored as its tensors plus a JSON outline of
the structure in the header's metadata. Nothing is pickled, so loading a
file cannot run code (torch.load's weights_only=True, always).

Tensors and modules also support copy.deepcopy and pickle (pickle being
Python's own format, for multiprocessing and the like, not for files from
elsewhere).
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np

from kiln import _C
from kiln._C import Tensor

# The metadata key that holds a checkpoint's outline; absent for a plain
# state dict, so such files are exactly what other safetensors readers write.
_STRUCTURE_KEY = "kiln.structure"
_FORMAT_VERSION = 1


def _is_state_dict(obj: Any) -> bool:
    return (isinstance(obj, dict) and
            all(isinstance(k, str) and isinstance(v, _C.Tensor) for k, v in obj.items()))


class _Outliner:
    """Turns a nested object into a JSON outline whose tensors are named
    entries of the file. A tensor met twice (tied weights) is stored once."""

    def __init__(self) -> None:
        self.tensors: list[tuple[str, Tensor]] = []
        self._names: dict[int, str] = {}

    def outline(self, obj: Any, where: str) -> Any:
        if isinstance(obj, _C.Tensor):
            name = self._names.get(id(obj))
            if name is None:
                name = self._names[id(obj)] = str(len(self.tensors))
                self.tensors.append((name, obj.detach()))
            return {"tensor": name}
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, int):
            return {"int": str(obj)}  # JSON readers may round big ints
        if isinstance(obj, float):
            return {"float": repr(obj)}  # repr round-trips, inf and nan included
        if isinstance(obj, (list, tuple)):
            items = [self.outline(v, f"{where}[{i}]") for i, v in enumerate(obj)]
            return {"tuple" if isinstance(obj, tuple) else "list": items}
        if isinstance(obj, Mapping):
            return {"dict": [[self._key(k, where), self.outline(v, f"{where}[{k!r}]")]
                             for k, v in obj.items()]}
        if isinstance(obj, (np.generic, np.ndarray)):
            raise TypeError(f"kiln.save: {where} is a NumPy {type(obj).__name__}; convert it "
                            "with kiln.from_numpy or .item() first")
        raise TypeError(f"kiln.save: {where} is a {type(obj).__name__}; a checkpoint holds "
                        "tensors, numbers, strings, bools, None and dicts, lists and tuples "
                        "of those (save a module's state_dict(), not the module)")

    def _key(self, key: Any, where: str) -> Any:
        if key is None or isinstance(key, (bool, str, int, float)):
            return self.outline(key, where)
        raise TypeError(f"kiln.save: {where} has a key of type {type(key).__name__}; keys "
                        "must be str, int, float, bool or None")


def _rebuild(outline: Any, tensors: dict[str, Tensor]) -> Any:
    if outline is None or isinstance(outline, (bool, str)):
        return outline
    if not isinstance(outline, dict) or len(outline) != 1:
        raise RuntimeError(f"kiln.load: the file's structure is damaged near {outline!r:.80}")
    kind, value = next(iter(outline.items()))
    if kind == "tensor":
        if value not in tensors:
            raise RuntimeError(f"kiln.load: the structure names tensor {value!r}, which the "
                               "file does not hold")
        return tensors[value]
    if kind == "int":
        return int(value)
    if kind == "float":
        return float(value)  # float() reads repr's "inf" and "nan" too
    if kind in ("list", "tuple"):
        items = [_rebuild(v, tensors) for v in value]
        return tuple(items) if kind == "tuple" else items
    if kind == "dict":
        return {_rebuild(k, tensors): _rebuild(v, tensors) for k, v in value}
    raise RuntimeError(f"kiln.load: unknown entry {kind!r} in the file's structure (written "
                       "by a newer kiln?)")


def save(obj: Any, f: str | os.PathLike[str], metadata: Mapping[str, str] | None = None) -> None:
    """Writes `obj` to path `f`: a state dict (name -> tensor) or any nesting
    of dicts, lists and tuples of tensors, numbers, strings, bools and None
    (a checkpoint). metadata: an optional dict of str -> str kept in the
    file's header."""
    metadata = dict(metadata or {})
    if _STRUCTURE_KEY in metadata:
        raise ValueError(f"kiln.save: the metadata key {_STRUCTURE_KEY!r} is kiln's own")
    if _is_state_dict(obj):
        items = [(name, tensor.detach()) for name, tensor in obj.items()]
    else:
        outliner = _Outliner()
        structure = outliner.outline(obj, "obj")
        items = outliner.tensors
        metadata[_STRUCTURE_KEY] = json.dumps({"version": _FORMAT_VERSION, "root": structure})
    _C.io.save_safetensors(items, os.fspath(f), metadata)


def _refuse_foreign(path: str) -> None:
    """A clear message for files that are not safetensors, before the
    reader's complaint about a header that makes no sense."""
    try:
        with open(path, "rb") as file:
            head = file.read(8)
    except OSError:
        return  # the reader names the path and the OS error
    what = None
    if head.startswith(b"PK\x03\x04"):
        what = "a zip archive, which is how torch.save writes (a pickled PyTorch checkpoint)"
    elif head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        what = "a Python pickle (an old-style torch.save file or pickle.dump)"
    elif head.startswith(b"\x93NUMPY"):
        what = "a NumPy .npy array (read it with numpy.load, then kiln.from_numpy)"
    elif head.startswith(b"\x89KILN"):
        what = "a compiled kiln model (read it with kiln.jit.load)"
    if what is not None:
        raise RuntimeError(
            f"kiln.load: {path} is not a kiln or safetensors file; it looks like {what}. kiln "
            "never unpickles files. From PyTorch, save the state dict with "
            "safetensors.torch.save_file(model.state_dict(), path) and load that.")


# load's overloads are for type checkers only: typing.overload's registry would
# keep this module's globals, kiln._C's objects among them, alive past
# interpreter shutdown (nanobind then reports them as leaked).
if TYPE_CHECKING:
    @overload
    def load(f: str | os.PathLike[str], map_location: Any = None, *,
             with_metadata: Literal[False] = False, weights_only: bool = True,
             mmap: bool | None = None) -> Any: ...

    @overload
    def load(f: str | os.PathLike[str], map_location: Any = None, *,
             with_metadata: Literal[True], weights_only: bool = True,
             mmap: bool | None = None) -> tuple[Any, dict[str, str]]: ...


def load(f: str | os.PathLike[str], map_location: Any = None, *, with_metadata: bool = False,
         weights_only: bool = True, mmap: bool | None = None) -> Any:
    """Reads what kiln.save wrote (or any safetensors file, as a dict of
    name -> tensor in the file's order). Aligned tensors are views of the
    file, mapped copy-on-write: no copy is made until one is written.
    map_location: a device, or a dict/callable as in torch.load; only the
    CPU exists, so anything else is refused. weights_only and mmap are
    accepted for torch.load's callers: kiln always loads weights only, and
    always maps. with_metadata: return (obj, metadata)."""
    from kiln import _device
    if map_location is not None and not isinstance(map_location, (dict,)) and \
            not callable(map_location):
        _device.check_device(_device.device(map_location), "kiln.load(map_location=...)")
    path = os.fspath(f)
    _refuse_foreign(path)
    tensors, metadata = _C.io.load_safetensors(path)
    named = dict(tensors)
    structure = metadata.pop(_STRUCTURE_KEY, None)
    obj: Any = named
    if structure is not None:
        outline = json.loads(structure)
        if outline.get("version") != _FORMAT_VERSION:
            raise RuntimeError(f"kiln.load: {path} has checkpoint format version "
                               f"{outline.get('version')!r}; this kiln reads version "
                               f"{_FORMAT_VERSION}")
        obj = _rebuild(outline["root"], named)
    return (obj, metadata) if with_metadata else obj


# -- copy.deepcopy and pickle of tensors ---------------------------------------

def _rebuild_tensor(array: np.ndarray, requires_grad: bool, parameter: bool) -> Tensor:
    tensor = _C.from_numpy(np.ascontiguousarray(array))
    if parameter:
        from kiln.nn.parameter import Parameter
        return Parameter(tensor, requires_grad)
    return tensor.requires_grad_(requires_grad) if requires_grad else tensor


def _check_leaf(tensor: Tensor, what: str) -> None:
    if not tensor.is_leaf:
        raise RuntimeError(f"{what}: only tensors created by the user (graph leaves) can be "
                           "copied this way; call .detach() first, as in PyTorch")


def _reduce_ex(self: Tensor, protocol: object) -> tuple[Any, tuple[Any, ...]]:
    _check_leaf(self, "pickle")
    from kiln.nn.parameter import Parameter
    array = self.detach().numpy().copy()
    return _rebuild_tensor, (array, bool(self.requires_grad), isinstance(self, Parameter))


def _deepcopy(self: Tensor, memo: dict[int, Any]) -> Tensor:
    if id(self) in memo:
        return memo[id(self)]
    _check_leaf(self, "copy.deepcopy")
    from kiln.nn.parameter import Parameter
    data = self.detach().clone()
    new = Parameter(data, self.requires_grad) if isinstance(self, Parameter) else \
        data.requires_grad_(self.requires_grad) if self.requires_grad else data
    memo[id(self)] = new
    if self.grad is not None:
        new.grad = _deepcopy(self.grad, memo)
    return new


def install_copying() -> None:
    _C.Tensor.__reduce_ex__ = _reduce_ex
    _C.Tensor.__deepcopy__ = _deepcopy
