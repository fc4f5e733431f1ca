"""Grad mode: kiln.no_grad() and kiln.enable_grad() as context managers and
decorators, kiln.set_grad_enabled(mode)."""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Literal, TypeVar, cast

from kiln import _C

F = TypeVar("F", bound=Callable[..., Any])


class _GradMode:
    mode = False

    def __enter__(self) -> None:
        self._previous = _C.is_grad_enabled()
        _C.set_grad_enabled(self.mode)

    def __exit__(self, *exc: object) -> Literal[False]:
        _C.set_grad_enabled(self._previous)
        return False

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.__class__():
                return fn(*args, **kwargs)
        return cast(F, wrapper)  # functools.wraps: fn's signature


class no_grad(_GradMode):
    mode = False


class enable_grad(_GradMode):
    mode = True


class set_grad_enabled(_GradMode):
    def __init__(self, mode: bool) -> None:
        self._previous = _C.is_grad_enabled()
        self.mode = mode
        _C.set_grad_enabled(mode)

    def __enter__(self) -> None:
        pass
