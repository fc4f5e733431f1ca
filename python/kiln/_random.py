"""Random numbers as PyTorch spells them: kiln.Generator and `generator=`,
the default generator's state, bernoulli, multinomial, normal, randperm,
and the in-place draws Tensor.uniform_ / normal_ / bernoulli_.

Without a generator, each draw is a random op of the table, taken from the
default generator (kiln.manual_seed) when it runs: a traced or compiled
function draws new numbers on every call. With a kiln.Generator of your own
the numbers are drawn at once from it (inside a trace they are frozen into
the graph, and kiln says so)."""
from __future__ import annotations

from typing import Any

import numpy as np

from kiln import _C
from kiln._C import Tensor
from kiln._device import DeviceLike, check_device

__all__ = ["Generator", "default_generator", "manual_seed", "seed", "initial_seed",
           "get_rng_state", "set_rng_state", "bernoulli", "multinomial", "normal", "randperm"]


class Generator(_C.Generator):
    """kiln.Generator(device="cpu"): a stream of random numbers of its own,
    for the `generator=` argument of the random functions, nn.init and the
    DataLoader. manual_seed(seed) returns it, as torch.Generator's does."""

    def __init__(self, device: DeviceLike = "cpu") -> None:
        check_device(device, "kiln.Generator")
        super().__init__()

    @property
    def device(self) -> Any:
        from kiln._device import CPU
        return CPU

    def __repr__(self) -> str:
        return f"<kiln.Generator seed={self.initial_seed()}>"


default_generator = _C.default_generator()


def manual_seed(seed: int) -> Any:
    """Seeds the default generator (every draw without a generator of its
    own, eager and compiled) and returns it."""
    return default_generator.manual_seed(int(seed))


def seed() -> int:
    """Seeds the default generator non-deterministically; returns the seed."""
    return int(default_generator.seed())


def initial_seed() -> int:
    return int(default_generator.initial_seed())


def get_rng_state() -> Tensor:
    """The default generator's state (an int64 tensor: seed and position)."""
    return default_generator.get_state()


def set_rng_state(new_state: Tensor) -> None:
    default_generator.set_state(new_state)


def bernoulli(input: Tensor, p: float | None = None, *, generator: Any = None) -> Tensor:
    """1 with probability input[i] (or p, shaped like input), else 0."""
    probs = input if p is None else _C.full(list(input.shape), float(p), input.dtype, False)
    return _C.bernoulli(probs, generator)


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *,
                generator: Any = None) -> Tensor:
    """num_samples category indices per row of input's non-negative weights."""
    return _C.multinomial(input, num_samples, replacement, generator)


def randperm(n: int, *, generator: Any = None, dtype: Any = None,
             requires_grad: bool = False, device: DeviceLike = None) -> Tensor:
    check_device(device, "randperm")
    return _C.randperm(int(n), dtype or _C.dtype.int64, requires_grad, generator)


def normal(mean: Any = 0.0, std: Any = 1.0, size: Any = None, *, generator: Any = None,
           dtype: Any = None, requires_grad: bool = False, device: DeviceLike = None) -> Tensor:
    """torch.normal's forms: normal(mean_tensor, std_tensor_or_float),
    normal(mean_float, std_tensor) (shaped as the broadcast of the tensors),
    or normal(mean_float, std_float, size)."""
    check_device(device, "normal")
    if isinstance(mean, _C.Tensor) or isinstance(std, _C.Tensor):
        if size is not None:
            raise TypeError("normal(): size= is only for float mean and std; with tensors the "
                            "shape is theirs")
        like = mean if isinstance(mean, _C.Tensor) else std
        shape = np.broadcast_shapes(*(tuple(t.shape) for t in (mean, std)
                                      if isinstance(t, _C.Tensor)))
        from kiln import _factories
        noise = _factories.randn(*shape, dtype=like.dtype, generator=generator)
        # torch.normal's samples carry no gradient to mean or std.
        return (mean + std * noise).detach()
    if size is None:
        raise TypeError("normal(): with a float mean and std, give size=")
    from kiln import _factories
    noise = _factories.randn(*size, dtype=dtype, generator=generator)
    out = noise * float(std) + float(mean)
    return out.requires_grad_(True) if requires_grad else out


# -- in-place draws (Tensor methods) ---------------------------------------------

def _draw_into(self: Tensor, drawn: Tensor) -> Tensor:
    # copy_ is recorded like any in-place write: in a trace the draw is a
    # random op that runs each call, and a leaf that requires grad is refused
    # outside no_grad, as in PyTorch.
    return self.copy_(drawn)


def _uniform_(self: Tensor, from_: float = 0.0, to: float = 1.0, *,
              generator: Any = None, **kwargs: Any) -> Tensor:
    from_ = kwargs.pop("from", from_)  # torch spells it `from`
    if kwargs:
        raise TypeError(f"uniform_() got unexpected keyword arguments {sorted(kwargs)}")
    if generator is not None:
        _C.nn.init.uniform_(self, float(from_), float(to), generator)
        return self
    return _draw_into(self, _C.dispatch("uniform_like", [self],
                                        {"low": float(from_), "high": float(to)}))


def _normal_(self: Tensor, mean: float = 0.0, std: float = 1.0, *,
             generator: Any = None) -> Tensor:
    if generator is not None:
        _C.nn.init.normal_(self, float(mean), float(std), generator)
        return self
    return _draw_into(self, _C.dispatch("normal_like", [self],
                                        {"mean": float(mean), "std": float(std)}))


def _bernoulli_(self: Tensor, p: Any = 0.5, *, generator: Any = None) -> Tensor:
    if isinstance(p, _C.Tensor):
        probs = p.to(self.dtype) if self.dtype.is_floating_point else p
        probs = probs.expand(list(self.shape))
    else:
        probs = _C.full(list(self.shape), float(p), self.dtype if self.dtype.is_floating_point
                        else _C.dtype.float32, False)
    return _draw_into(self, _C.bernoulli(probs, generator))


def install_tensor_methods() -> None:
    cls = _C.Tensor
    cls.uniform_ = _uniform_
    cls.normal_ = _normal_
    cls.bernoulli_ = _bernoulli_
    cls.bernoulli = bernoulli
    cls.multinomial = multinomial
