"""Guards on the Python values a compiled entry was recorded with: numbers,
flags and strings its code read from module attributes (self.scale), from
the compiled function's own globals and closure variables, and an
optimizer's hyperparameters. The graph holds each as a constant; when one
changes, the cache drops its entries, the next call records again, and
cache_info() names the value with its old and new value.

Parameters, buffers and submodules are guarded too, by identity: the graph
binds the tensors it was recorded with and runs the code of the submodules
it met, so replacing one (not updating it in place) records again.

What it costs per call: Module.__setattr__ and __delattr__ and an
optimizer's param_groups bump `version` on every assignment, and a
cache compares its values only once that moved: one integer compare while
nothing changed. Which attributes the code reads is seen while it records:
each module's plain attributes leave its __dict__ for the recording and
Module.__getattr__ serves them, noting the read, so a value the code never
reads costs no recording when it changes. Globals and closure variables
have no such hook: a compiled function that reads some compares them on
every call.

A value the code itself assigns while recording (a Python counter) is
reported, since compiled calls do not assign it again; the guard holds its
value after the recording, so it does not record again on every call.

Not guarded: numbers read from other objects (a config object, a list) and,
for hybridize, the globals forward reads; an optimizer's learning rate needs
no guard, as a compiled step reads it as a tensor."""
from __future__ import annotations

import itertools
import numbers
import types
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from kiln import _C

_counter = itertools.count(1)
version = 0  # moves on every assignment that may change a guarded value

# How many times one value may change before the cache warns that it keeps
# recording (SignatureCache::kWarnAfter for shapes).
WARN_AFTER = 8

MISSING = object()
# Module.__dict__ keys that are kiln's own, never user attributes.
_INTERNAL = frozenset({"training", "_parameters", "_buffers", "_modules", "_hybrid",
                       "_hybrid_options", "_non_persistent", "_jit_hidden"})


def bump() -> None:
    """A plain value was assigned somewhere: caches check theirs on their next
    call. A fresh number each time (itertools.count is atomic), so no cache
    can hold it already."""
    global version
    version = next(_counter)


def is_plain(value: Any) -> bool:
    """A value a graph bakes in as a constant: a number, flag, string, None or
    dtype, or a tuple of them."""
    if isinstance(value, (str, bytes, type(None), _C.dtype, numbers.Number)):
        return True
    return type(value) is tuple and all(is_plain(v) for v in value)


def same(a: Any, b: Any) -> bool:
    """Equal and of one type (2 and 2.0 give graphs of other dtypes); NaN
    equals NaN."""
    if type(a) is not type(b):
        return False
    if type(a) is tuple:
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return bool(a == b) or (a != a and b != b)


# -- guards -------------------------------------------------------------------
class Guard:
    """One value: what to call it, how to read it now, what it was.
    every_call: nothing bumps `version` when it changes (a global, a
    closure variable), so it is compared on every call."""

    __slots__ = ("name", "read", "value", "every_call")

    def __init__(self, name: str, read: Callable[[], Any], every_call: bool = False) -> None:
        self.name, self.read, self.every_call = name, read, every_call
        self.value = read()

    def again(self) -> Guard:
        """The same guard on the value it has now."""
        return Guard(self.name, self.read, self.every_call)

    def change(self) -> str | None:
        now = self.read()
        if not is_plain(self.value):  # a parameter, buffer or submodule: the same object?
            if now is self.value:
                return None
            return f"{self.name} was replaced ({_text(self.value)} -> {_text(now)})"
        if same(now, self.value):
            return None
        return f"{self.name} changed from {_text(self.value)} to {_text(now)}"


def _text(value: Any) -> str:
    if value is MISSING:
        return "(deleted)"
    if isinstance(value, _C.Tensor):
        return f"a {value.dtype} tensor of shape {list(value.shape)}"
    if is_plain(value):
        return repr(value)
    return f"a {type(value).__name__}"


def _attr_reader(module: Any, name: str) -> Callable[[], Any]:
    d = module.__dict__
    return lambda: d.get(name, MISSING)


def _member_reader(table: dict[str, Any], name: str) -> Callable[[], Any]:
    return lambda: table.get(name, MISSING)


def _class_attr_reader(module: Any, name: str) -> Callable[[], Any]:
    return lambda: getattr(module, name, MISSING)


# -- recording ----------------------------------------------------------------
class Recording:
    """Hides the plain attributes of `modules` ({module: its name in
    messages}) while it lives and notes which ones the code reads."""

    def __init__(self, modules: dict[Any, str], strict: bool) -> None:
        self.modules = modules
        self.strict = strict
        self.reads: dict[tuple[int, str], tuple[Any, str]] = {}
        self.shadowed: list[tuple[Any, str]] = []  # class attributes: guarded as read

    def __enter__(self) -> Recording:
        for module in self.modules:
            self._hide(module)
        return self

    def __exit__(self, *exc: object) -> None:
        for module in self.modules:
            self._unhide(module)

    def note(self, module: Any, name: str) -> None:
        self.reads.setdefault((id(module), name), (module, name))

    def _hide(self, module: Any) -> None:
        d = module.__dict__
        members = set(module._parameters) | set(module._buffers) | set(module._modules)
        on_class = set().union(*(vars(k) for k in type(module).__mro__))
        # Names a class defines stay in place (hiding an instance's value
        # would show the class's), and reads of a class's own values (`flag =
        # True` in its body) go unseen: all guarded, as if read.
        shadowed = [n for n, v in d.items() if n in on_class and is_plain(v)]
        for name in dict.fromkeys(shadowed + _class_values(type(module))):
            if name not in members and name not in _INTERNAL:
                self.shadowed.append((module, name))
        if "_jit_hidden" in d:  # another recording hid it: read through it too
            d["_jit_hidden"][1].append(self)
            return
        hidden = {}
        for name, value in list(d.items()):
            kept = name in _INTERNAL or name in members or name in on_class
            if not kept and is_plain(value):
                hidden[name] = d.pop(name)
        d["_jit_hidden"] = (hidden, [self])

    def _unhide(self, module: Any) -> None:
        d = module.__dict__
        hidden, readers = d["_jit_hidden"]
        readers[:] = [r for r in readers if r is not self]
        if readers:
            return
        del d["_jit_hidden"]
        for name, value in hidden.items():
            d.setdefault(name, value)  # what the code assigned meanwhile stays

    def guards(self) -> list[Guard]:
        out = [Guard(f"{self.modules[m]}.{name}", _attr_reader(m, name))
               for m, name in self.reads.values()]
        out += [Guard(f"{self.modules[m]}.{name}", _class_attr_reader(m, name))
                for m, name in self.shadowed]
        # The graph binds the parameters and buffers it was recorded with and
        # runs the submodules' code as it was: replacing one records again.
        for m, path in self.modules.items():
            for table in (m._parameters, m._buffers, m._modules):
                out += [Guard(f"{path}.{name}", _member_reader(table, name)) for name in table]
        return out


def _class_values(cls: type) -> list[str]:
    """The plain values the classes of a module (up to Module) define."""
    from kiln.nn import Module
    names: dict[str, None] = {}
    for klass in cls.__mro__:
        if klass is Module:
            break  # kiln's own base, and what it derives from
        for name, value in vars(klass).items():
            if not name.startswith("__") and is_plain(value):
                names.setdefault(name)
    return list(names)


def hidden_attr(module: Any, name: str) -> Any:
    """Module.__getattr__'s fallback: a plain attribute hidden for a
    recording, noted as read; MISSING when there is none."""
    hidden = module.__dict__.get("_jit_hidden")
    if hidden is None or name not in hidden[0]:
        return MISSING
    for recording in hidden[1]:
        recording.note(module, name)
    return hidden[0][name]


def deleting(module: Any, name: str) -> bool:
    """Module.__delattr__ of a value that is no member: caches check theirs on
    their next call. True when it was hidden for a recording, and is now gone."""
    bump()
    hidden = module.__dict__.get("_jit_hidden")
    if hidden is None or name not in hidden[0]:
        return False
    del hidden[0][name]
    return True


def assigning(module: Any, name: str, value: Any) -> None:
    """Module.__setattr__ is about to store a value that is no parameter,
    buffer or submodule: caches check theirs on their next call. Assigned by
    code being recorded, it is reported: compiled calls do not run that
    Python code again."""
    bump()
    d = module.__dict__
    hidden = d.get("_jit_hidden")
    if hidden is None or not is_plain(value):
        return
    old = d[name] if name in d else hidden[0].get(name, MISSING)
    if same(old, value):
        return
    recording = hidden[1][0]
    where = recording.modules.get(module, type(module).__name__)
    report(f"{where}.{name} = {value!r} assigned while tracing (it was {_text(old)}): a Python "
           "value, which the compiled calls do not assign again; keep state the code updates "
           "in a tensor buffer (the graph then updates it on every call)", recording.strict)


def report(message: str, strict: bool) -> None:
    """A TracerWarning (TraceError in strict mode) at the user's line."""
    from kiln.jit import _record
    frame = _record._user_frame()
    filename = frame.f_code.co_filename if frame else "<unknown>"
    lineno = frame.f_lineno if frame else 0
    text = f"{message} (at {filename}:{lineno})"
    if strict:
        raise _record.TraceError(text)
    registry = frame.f_globals.setdefault("__warningregistry__", {}) if frame else None
    module = frame.f_globals.get("__name__") if frame else None
    warnings.warn_explicit(text, _record.TracerWarning, filename, lineno, module=module,
                           registry=registry)


# -- what a function reads ----------------------------------------------------
def _code_names(code: types.CodeType) -> Iterator[str]:
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):  # lambdas, comprehensions, nested defs
            yield from _code_names(const)


def function_values(fn: Any) -> tuple[dict[Any, str], list[Guard]]:
    """What `fn` reaches by name: the modules among its globals, closure
    variables and bound `self` ({module: name}, to hide while recording);
    and guards on the plain values among them and on the options of the
    optimizers among them."""
    from kiln.nn import Module
    from kiln.optim import Optimizer

    roots: dict[str, Any] = {}
    owner = getattr(fn, "__self__", None)
    if owner is not None:
        roots["self"] = owner
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        return {}, []
    guards: list[Guard] = []
    cells = zip(code.co_freevars, fn.__closure__ or ())
    for name, cell in cells:
        value = _cell_value(cell)
        if is_plain(value):
            guards.append(Guard(f"closure variable {name}", _cell_reader(cell), True))
        elif value is not MISSING:
            roots.setdefault(name, value)
    g = fn.__globals__
    for name in dict.fromkeys(_code_names(code)):
        value = g.get(name, MISSING)
        if value is MISSING or isinstance(value, types.ModuleType):
            continue
        if is_plain(value):
            guards.append(Guard(f"global {name}", _global_reader(g, name), True))
        else:
            roots.setdefault(name, value)
    modules: dict[Any, str] = {}
    for name, value in roots.items():
        if isinstance(value, Module):
            modules.update(module_names(value, name))
        elif isinstance(value, Optimizer):
            guards += optimizer_guards(value, name)
    return modules, guards


def _cell_value(cell: types.CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # not assigned yet
        return MISSING


def _cell_reader(cell: types.CellType) -> Callable[[], Any]:
    return lambda: _cell_value(cell)


def _global_reader(g: dict[str, Any], name: str) -> Callable[[], Any]:
    return lambda: g.get(name, MISSING)


def module_names(root: Any, name: str) -> dict[Any, str]:
    """{module: "self.encoder.drop"} over root's tree."""
    return {m: f"{name}.{path}" if path else name for path, m in root.named_modules()}


def optimizer_guards(opt: Any, name: str) -> list[Guard]:
    """Every value of every group (a compiled step holds the options as
    constants), and the groups and the state themselves, which
    load_state_dict replaces. Not a group's lr once a built-in optimizer's
    compiled step reads it as a tensor (the group's _lr_tensor, which
    assigning lr keeps current)."""
    guards = [Guard(f"len({name}.param_groups)", lambda: len(opt.param_groups)),
              Guard(f"{name}.state", lambda: opt.state)]
    for g, group in enumerate(opt.param_groups):
        guards += [Guard(f"{name}.param_groups[{g}][{key!r}]", _group_reader(opt, g, key))
                   for key in group]
    return guards


def _group_reader(opt: Any, g: int, key: str) -> Callable[[], Any]:
    def read() -> Any:
        groups = opt.param_groups
        if g >= len(groups):
            return MISSING
        if key == "lr" and getattr(groups[g], "_lr_tensor", None) is not None:
            return None  # a tensor the compiled step reads: no constant
        return groups[g].get(key, MISSING)
    return read
