"""Compiled on first call, per input signature: the machinery behind
Module.hybridize() and @kiln.compile. A call whose signature (dtypes and
shapes, grad mode, train/eval) was seen before is one call into C++
(SignatureCache.run); a new one records the Python code once."""
from kiln import _C
from kiln.jit import _record


class HybridCache:
    """Compiles `fn` once per input signature. `params()` gives the (name,
    tensor) pairs to bind as graph parameters, read at each recording."""

    def __init__(self, fn, owner, params=lambda: [], strict=False, bind_outside_state=False,
                 **compile_options):
        self._fn = fn
        self._bind_outside_state = bind_outside_state
        self._owner = owner
        self._params = params
        self._strict = strict
        self._compile_options = compile_options
        self._cache = _C.jit.SignatureCache(owner)
        self._spec = None
        # The hit path, for callers that inline it (Module.__call__): run(args,
        # training) gives the flat outputs or None; `single` says the result
        # is out[0], else unflatten(out).
        self.run = self._cache.run
        self.single = False

    def __call__(self, args, kwargs=None, training=False):
        if not kwargs:
            out = self.run(args, training)
            if out is not None:
                return out[0] if self.single else self.unflatten(out)
        return self.miss(args, kwargs, training)

    def unflatten(self, flat):
        return _record.unflatten(self._spec, flat)

    def miss(self, args, kwargs, training):
        """A call the cache could not serve: records (or, inside another
        trace, runs the code eagerly)."""
        # Inside another trace the outer recording takes the ops as they run.
        if _C.jit.is_recording():
            return self._fn(*args, **(kwargs or {}))
        if kwargs:
            raise TypeError(f"{self._owner}: keyword arguments ({', '.join(kwargs)}) are not "
                            "supported by a compiled call; pass tensors positionally")
        _record.check_inputs(args, self._owner)
        signature = _C.jit.signature_of(list(args), training)
        compiled, result, spec = _record.record(self._fn, args, self._params(), self._strict,
                                                self._compile_options, self._bind_outside_state)
        if self._spec is not None and spec != self._spec:
            raise TypeError(f"{self._owner}: the function returned a different structure for "
                            f"{signature} than for earlier calls; a compiled function returns "
                            "one structure")
        self._spec = spec
        self.single = spec is _record.LEAF
        self._cache.insert(signature, compiled)
        return result

    def cache_info(self):
        """Entries (one signature each), hits, and each miss with the guard
        that failed (old -> new)."""
        return self._cache.info()
