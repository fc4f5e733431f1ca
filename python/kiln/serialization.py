"""kiln.save / kiln.load: state dicts as safetensors files.

    kiln.save(model.state_dict(), "model.safetensors")
    model.load_state_dict(kiln.load("model.safetensors"))

The file is in the safetensors layout, so the `safetensors` package (and the
libraries built on it) reads kiln's weights, and kiln reads theirs. Unlike
torch.save, only a mapping of names to tensors can be saved: the format holds
tensors, never pickled Python objects, so loading a file cannot run code.
"""
import os

from kiln import _C


def save(obj, path, metadata=None):
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


def load(path, with_metadata=False):
    """Reads a safetensors file into a dict of name -> tensor (in the file's
    order). Aligned tensors are views of the file, mapped copy-on-write: no
    copy is made until one is written. with_metadata: return (dict, metadata)."""
    tensors, metadata = _C.io.load_safetensors(os.fspath(path))
    state = dict(tensors)
    return (state, metadata) if with_metadata else state
