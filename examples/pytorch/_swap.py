"""Runs a PyTorch program of this folder on kiln by rewriting its imports, and
nothing else: the edit a user makes by hand.

    python examples/pytorch/_swap.py gpt.py [args]        # gpt.py on kiln
    python -m examples.pytorch._swap gpt [args]            # the same, from the repo root

The convention: a program imports torch only in these forms, and each
becomes its kiln form (the rest of the text keeps calling `torch.`, which
then names kiln):

    import torch                           ->  import kiln as torch
    import torch.nn as nn                  ->  import kiln.nn as nn
    import torch.nn.functional as F        ->  import kiln.nn.functional as F
    from torch import nn, optim            ->  from kiln import nn, optim
    from torch.utils.data import Dataset   ->  from kiln.utils.data import Dataset

load(path, "torch" | "kiln") gives the program as a module without running
its main(), so tests can call its functions under both frameworks.
"""
from __future__ import annotations

import pathlib
import re
import sys
import types

HERE = pathlib.Path(__file__).resolve().parent

_PLAIN = re.compile(r"^(\s*)import torch(\s*(#.*)?)$")
_DOTTED = re.compile(r"^(\s*)import torch\.([\w.]+) as (\w+)")
_FROM = re.compile(r"^(\s*)from torch((\.[\w.]+)?) import ")
_BARE_DOTTED = re.compile(r"^\s*import torch\.[\w.]+\s*(#.*)?$")


def to_kiln(source: str) -> str:
    """`source` with its torch imports turned into kiln's; any other line is
    kept as it is. An `import torch.x` without `as` (it binds the name torch
    to the package) has no one-line kiln form, so it is refused."""
    lines = []
    for number, line in enumerate(source.splitlines(keepends=True), 1):
        if _BARE_DOTTED.match(line):
            raise ValueError(f"line {number}: write `import torch.x as y` or `from torch.x "
                             f"import y`, not {line.strip()!r}")
        line = _PLAIN.sub(r"\1import kiln as torch\2", line)
        line = _DOTTED.sub(r"\1import kiln.\2 as \3", line)
        line = _FROM.sub(r"\1from kiln\2 import ", line)
        lines.append(line)
    return "".join(lines)


def resolve(program: str) -> pathlib.Path:
    """A program named as `gpt`, `gpt.py` or a path."""
    path = pathlib.Path(program)
    if path.exists():
        return path.resolve()
    name = program if program.endswith(".py") else program + ".py"
    return HERE / name


def load(program: str, framework: str = "kiln") -> types.ModuleType:
    """The program as a fresh module (its main() not run), with its imports
    as written (framework="torch") or swapped to kiln ("kiln")."""
    if framework not in ("torch", "kiln"):
        raise ValueError(f"framework must be 'torch' or 'kiln', not {framework!r}")
    path = resolve(program)
    source = path.read_text()
    if framework == "kiln":
        source = to_kiln(source)
    module = types.ModuleType(f"{path.stem}_{framework}")
    module.__file__ = str(path)
    # Registered so that classes defined in it can be pickled and found again.
    sys.modules[module.__name__] = module
    exec(compile(source, str(path), "exec"), module.__dict__)
    return module


def main(argv: list[str]) -> None:
    if not argv:
        sys.exit(__doc__)
    path = resolve(argv[0])
    module = types.ModuleType("__main__")
    module.__file__ = str(path)
    sys.argv = [str(path), *argv[1:]]
    code = compile(to_kiln(path.read_text()), str(path), "exec")
    sys.modules["__main__"] = module
    exec(code, module.__dict__)


if __name__ == "__main__":
    main(sys.argv[1:])
