"""Compiled on first call, per input signature: the machinery behind
Module.hybridize() and @kiln.compile. The cache is C++'s (kiln._C.jit.
HybridCache: hit, miss, guards, recording, strict mode); this wrapper only
flattens the function's outputs for it and rebuilds them. A call whose
signature (dtypes and shapes, grad mode, train/eval) was seen before is one
call into C++.

The Python values the recorded code read (module attributes, the function's
globals and closure variables, optimizer options) are guarded here
(_guards): a change drops the entries, and the miss that follows says which
value changed."""
from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from kiln import _C
from kiln._C import Tensor
from kiln.jit import _guards, _record

# What a recording hides and guards: ({module: its name in messages},
# guards on other values), asked for at each recording.
Values = Callable[[], tuple[dict[Any, str], list[_guards.Guard]]]


class HybridCache:
    """Compiles `fn` once per input signature. `params()` gives the (name,
    tensor) pairs to bind as graph parameters, read at each recording;
    `values()` the modules whose plain attributes the code may read and the
    other values it reads (see Values)."""

    def __init__(self, fn: Callable[..., Any], owner: str,
                 params: Callable[[], list[tuple[str, Tensor]]] | None = None,
                 strict: bool = False, bind_outside_state: bool = False, optimize: bool = True,
                 frozen: bool = False, fast_math: bool = False,
                 passes: Sequence[str] | None = None, dynamic: bool | None = None,
                 values: Values | None = None, exact: bool = False) -> None:
        self._fn = fn
        self._owner = owner
        self._strict = strict
        # What a cache for another form of the call (keywords, non-tensor
        # arguments) is made with: these same settings (see _by_form).
        self._settings: dict[str, Any] = dict(
            params=params, strict=strict, bind_outside_state=bind_outside_state,
            optimize=optimize, frozen=frozen, fast_math=fast_math, passes=passes,
            dynamic=dynamic, values=values, exact=exact)
        self._forms: dict[Any, HybridCache] = {}
        self._values = values
        self._guards: list[_guards.Guard] = []
        self._changes: dict[str, int] = {}  # how many times each guarded value changed
        # Whether to compare the guards on this call: `version` is
        # _guards.version when they were last found unchanged; `always` when
        # some can change without moving it (globals, closure variables).
        self.version = _guards.version
        self.always = False
        self._flat = _record.FlatFunction(fn, owner)
        self._cache = _C.jit.HybridCache(
            owner, self._flat, params, strict=strict, bind_outside_state=bind_outside_state,
            input_names=_record.input_names(fn), optimize=optimize, frozen=frozen,
            fast_math=fast_math, exact=exact, passes=list(passes or []), dynamic=dynamic)
        # The hit path, for callers that inline it (Module.__call__): run(args,
        # training) gives the flat outputs or None; `single` says the result
        # is out[0], else unflatten(out).
        self.run: Callable[[tuple[Any, ...], bool], list[Tensor] | None] = self._cache.run
        self.single = False

    def __call__(self, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None,
                 training: bool = False) -> Any:
        if self.always or self.version != _guards.version:
            self.check_values()
        if not kwargs:
            out = self.run(args, training)
            if out is not None:
                return out[0] if self.single else self.unflatten(out)
        return self.miss(args, kwargs, training)

    def unflatten(self, flat: Sequence[Tensor]) -> Any:
        return _record.unflatten(self._flat.spec, flat)

    def miss(self, args: tuple[Any, ...], kwargs: dict[str, Any] | None, training: bool) -> Any:
        """A call the cache could not serve: records (or, inside another
        trace, runs the code eagerly)."""
        if _C.jit.is_recording():  # the outer recording takes the ops as they run
            return self._fn(*args, **(kwargs or {}))
        if kwargs or not all(isinstance(a, _C.Tensor) for a in args):
            return self._by_form(args, kwargs or {}, training)
        _record.check_inputs(args, self._owner)
        modules, guards = self._values() if self._values else ({}, [])
        with _guards.Recording(modules, self._strict) as recording:
            flat = self._cache.record(list(args), training)
        # Entries recorded before read what the guards hold (a changed value
        # dropped them); the new one may read more. Values are taken after
        # the recording, so that code assigning what it reads (a counter)
        # does not drop its own entry on the next call.
        merged = {g.name: g.again() for g in self._guards}
        merged.update((g.name, g.again()) for g in guards + recording.guards())
        self._guards = list(merged.values())
        self.always = any(g.every_call for g in self._guards)
        self.version = _guards.version
        self.single = self._flat.spec is _record.LEAF
        return self.unflatten(flat)

    def _by_form(self, args: tuple[Any, ...], kwargs: dict[str, Any], training: bool) -> Any:
        """A call with keyword arguments or non-tensor ones (None for an
        optional mask, a flag, an output size), as PyTorch models are
        called: its tensors go to a cache of their own for this form of the
        call, keyed by which arguments are given and the non-tensor values,
        which its graphs hold as constants (a new value records anew)."""
        try:
            bound = inspect.signature(self._fn).bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self._owner}: {e}") from None
        form: list[tuple[str, Any]] = []
        tensors: list[Tensor] = []
        for name, value in bound.arguments.items():
            form.append((name, _form_of(value, tensors, f"{self._owner}: argument {name!r}")))
        key = tuple(form)
        cache = self._forms.get(key)
        if cache is None:
            cache = HybridCache(_with_form(self._fn, bound.signature, key), self._owner,
                                **self._settings)
            self._forms[key] = cache
        return cache(tuple(tensors), None, training)

    def check_values(self) -> None:
        """Compares the guarded values with those the entries were recorded
        with; a change drops the entries (the miss that follows names it)."""
        self.version = _guards.version
        changes = [(g.name, text) for g in self._guards if (text := g.change()) is not None]
        if not changes:
            return
        self._guards, self.always = [], False
        self._cache.invalidate("; ".join(text for _, text in changes))
        for name, _ in changes:
            count = self._changes[name] = self._changes.get(name, 0) + 1
            if count == _guards.WARN_AFTER:
                _guards.report(
                    f"{self._owner}: {name} changed {count} times, and each change records the "
                    "code again (the graph holds its value as a constant); a value that changes "
                    "often belongs in a tensor (an argument or a registered buffer), which the "
                    "graph reads on every call", strict=False)

    def cache_info(self) -> Any:
        """Entries (one signature each, symbolic dims and guards included),
        hits, and each miss with the guard that failed."""
        return self._cache.info()


class _TensorSlot:
    def __repr__(self) -> str:
        return "<tensor>"


_TENSOR = _TensorSlot()  # in a call's form: a tensor argument, an input of the graph


def _form_of(value: Any, tensors: list[Tensor], what: str) -> Any:
    """A call's argument as a hashable key: its tensors (also inside
    tuples, lists and dicts, as an LSTM's (h0, c0)) become _TENSOR slots,
    appended to `tensors`; lists become tuples."""
    if isinstance(value, _C.Tensor):
        tensors.append(value)
        return _TENSOR
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_form_of(v, tensors, what) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, _form_of(value[k], tensors, what)) for k in value))
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"{what} is a {type(value).__name__}, which a compiled call cannot "
                        "key its graphs by; pass tensors (or tuples, lists and dicts of "
                        "them), numbers, strings or None") from None
    return value


def _thawed(key: Any, tensors: Iterator[Tensor]) -> Any:
    if key is _TENSOR:
        return next(tensors)
    if isinstance(key, tuple) and len(key) == 2 and key[0] in ("list", "tuple", "dict"):
        kind, items = key
        if kind == "dict":
            return {k: _thawed(v, tensors) for k, v in items}
        values = [_thawed(v, tensors) for v in items]
        return values if kind == "list" else tuple(values)
    return key


def _with_form(fn: Callable[..., Any], signature: inspect.Signature,
               form: tuple[tuple[str, Any], ...]) -> Callable[..., Any]:
    """fn called with the tensors positionally: the other arguments of
    `form` are put back as given (keywords stay keywords)."""
    def call(*tensors: Tensor) -> Any:
        given = iter(tensors)
        arguments = {name: _thawed(value, given) for name, value in form}
        bound = inspect.BoundArguments(signature, arguments)
        return fn(*bound.args, **bound.kwargs)

    names = [slot for name, value in form for slot in _slot_names(name, value)]
    call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in names])
    return call


def _slot_names(name: str, key: Any) -> list[str]:
    """The graph input names of an argument's tensors, in order: the
    argument's name, or name_0, name_1, ... inside a container."""
    if key is _TENSOR:
        return [name]
    if isinstance(key, tuple) and len(key) == 2 and key[0] in ("list", "tuple"):
        return [n for i, k in enumerate(key[1]) for n in _slot_names(f"{name}_{i}", k)]
    if isinstance(key, tuple) and len(key) == 2 and key[0] == "dict":
        return [n for k, v in key[1] for n in _slot_names(f"{name}_{k}", v)]
    return []
