"""Grad mode: kiln.no_grad() and kiln.enable_grad() as context managers and
decorators, kiln.set_grad_enabled(mode)."""
import functools

from kiln import _C


class _GradMode:
    mode = False

    def __enter__(self):
        self._previous = _C.is_grad_enabled()
        _C.set_grad_enabled(self.mode)

    def __exit__(self, *exc):
        _C.set_grad_enabled(self._previous)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradMode):
    mode = False


class enable_grad(_GradMode):
    mode = True


class set_grad_enabled(_GradMode):
    def __init__(self, mode):
        self._previous = _C.is_grad_enabled()
        self.mode = mode
        _C.set_grad_enabled(mode)

    def __enter__(self):
        pass
