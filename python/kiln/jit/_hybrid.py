"""Compiled on first call, per input signature: the machinery behind
Module.hybridize() and @kiln.compile. The cache is C++'s (kiln._C.jit.
HybridCache: hit, miss, guards, recording, strict mode); this wrapper only
flattens the function's outputs for it and rebuilds them. A call whose
signature (dtypes and shapes, grad mode, train/eval) was seen before is one
call into C++."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from kiln import _C
from kiln._C import Tensor
from kiln.jit import _record


class HybridCache:
    """Compiles `fn` once per input signature. `params()` gives the (name,
    tensor) pairs to bind as graph parameters, read at each recording."""

    def __init__(self, fn: Callable[..., Any], owner: str,
                 params: Callable[[], list[tuple[str, Tensor]]] | None = None,
                 strict: bool = False, bind_outside_state: bool = False, optimize: bool = True,
                 frozen: bool = False, fast_math: bool = False,
                 passes: Sequence[str] | None = None, dynamic: bool | None = None) -> None:
        self._fn = fn
        self._owner = owner
        self._flat = _record.FlatFunction(fn, owner)
        self._cache = _C.jit.HybridCache(
            owner, self._flat, params, strict=strict, bind_outside_state=bind_outside_state,
            input_names=_record.input_names(fn), optimize=optimize, frozen=frozen,
            fast_math=fast_math, passes=list(passes or []), dynamic=dynamic)
        # The hit path, for callers that inline it (Module.__call__): run(args,
        # training) gives the flat outputs or None; `single` says the result
        # is out[0], else unflatten(out).
        self.run: Callable[[tuple[Any, ...], bool], list[Tensor] | None] = self._cache.run
        self.single = False

    def __call__(self, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None,
                 training: bool = False) -> Any:
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
        if kwargs:
            raise TypeError(f"{self._owner}: keyword arguments ({', '.join(kwargs)}) are not "
                            "supported by a compiled call; pass tensors positionally")
        _record.check_inputs(args, self._owner)
        flat = self._cache.record(list(args), training)
        self.single = self._flat.spec is _record.LEAF
        return self.unflatten(flat)

    def cache_info(self) -> Any:
        """Entries (one signature each, symbolic dims and guards included),
        hits, and each miss with the guard that failed."""
        return self._cache.info()
