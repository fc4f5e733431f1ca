"""PyTorch's argument forms for scatter, the indexing writes and reads
kiln composes in C++ (ops/indexing.h: index_fill, index_copy,
take_along_dim, masked_select, masked_scatter), lerp, torch.norm and
torch.cdist (ops/norms.h; kiln.linalg holds the rest), the arc* names of
the inverse trigonometric ops, the OpenMP thread count and the eager
packed-weight cache. Each function
only reshapes its arguments and calls kiln._C. _torch_forms re-exports
them, so they are kiln.<name> and Tensor methods like its own."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kiln import _C, _ops
from kiln._C import Tensor

__all__: list[str] = ["scatter", "index_fill", "index_copy", "take_along_dim", "masked_select",
           "masked_scatter", "lerp", "norm", "cdist", "set_num_threads", "get_num_threads",
           "set_team_busy_fallback", "team_busy_fallback", "team_stats", "arcsin", "arccos",
           "arctan", "arcsinh", "arccosh", "arctanh", "arctan2", "set_eager_weight_cache_limit",
           "eager_weight_cache_stats", "clear_eager_weight_cache"]

# Functions of torch that are not Tensor methods there either.
NOT_METHODS: set[str] = {"cdist", "set_num_threads", "get_num_threads", "set_team_busy_fallback",
                         "team_busy_fallback", "team_stats", "set_eager_weight_cache_limit",
                         "eager_weight_cache_stats", "clear_eager_weight_cache"}

_REDUCE = {None: "none", "add": "add", "multiply": "multiply"}


def _reduce(reduce: str | None) -> str:
    if reduce not in _REDUCE:
        raise RuntimeError(f"scatter: reduce argument must be either add or multiply, "
                           f"got {reduce!r}")
    return _REDUCE[reduce]


def _source(src: Any, value: Any) -> Any:
    if (src is None) == (value is None):
        raise TypeError("scatter(): give exactly one of src (a tensor) or value (a number)")
    return src if value is None else value


def scatter(input: Tensor, dim: int, index: Tensor, src: Any = None, value: Any = None, *,
            reduce: str | None = None) -> Tensor:
    """input with src's elements (or one value) written where index points
    along dim; reduce="add" / "multiply" combines instead of replacing."""
    return _C.scatter(input, dim, index, _source(src, value), _reduce(reduce))


def _scatter_(self: Tensor, dim: int, index: Tensor, src: Any = None, value: Any = None, *,
              reduce: str | None = None) -> Tensor:
    """In place: x.scatter_(dim, index, src or value, reduce=None)."""
    return _C.scatter_(self, dim, index, _source(src, value), _reduce(reduce))


def index_fill(input: Tensor, dim: int, index: Tensor, value: Any) -> Tensor:
    """input with the slices index[i] along dim set to value (a number or a
    0-d tensor); negative indices count from the end."""
    return _C.index_fill(input, dim, index, value)


def _index_fill_(self: Tensor, dim: int, index: Tensor, value: Any) -> Tensor:
    return _C.index_fill_(self, dim, index, value)


def index_copy(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """input with slice index[i] along dim replaced by source's slice i."""
    return _C.index_copy(input, dim, index, source)


def _index_copy_(self: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    return _C.index_copy_(self, dim, index, source)


def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """gather along dim after broadcasting input and indices over the other
    dims; with no dim, of the flattened input."""
    return _C.take_along_dim(input, indices, dim)


def masked_select(input: Tensor, mask: Tensor) -> Tensor:
    """The elements where the bool mask (broadcast) is True, as a 1-D tensor.
    Its length depends on the data, so it refuses to be traced."""
    return _C.masked_select(input, mask)


def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """input with the positions where mask is True filled, in order, from
    source's elements."""
    return _C.masked_scatter(input, mask, source)


def _masked_scatter_(self: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    return _C.masked_scatter_(self, mask, source)


def lerp(input: Tensor, end: Tensor, weight: Any) -> Tensor:
    """input + weight * (end - input), weight a number or a tensor."""
    return _C.lerp(input, end, weight)


def _lerp_(self: Tensor, end: Tensor, weight: Any) -> Tensor:
    return _C.lerp_(self, end, weight)


def _dims(dim: int | Sequence[int] | None) -> list[int] | None:
    if dim is None:
        return None
    return [dim] if isinstance(dim, int) else list(dim)


def norm(input: Tensor, p: float | str | None = "fro", dim: int | Sequence[int] | None = None,
         keepdim: bool = False, out: Any = None, dtype: _C.dtype | None = None) -> Tensor:
    """torch.norm: the vector p-norm over dim (all dims when None); "fro"
    (the default) is the 2-norm. For new code PyTorch suggests
    kiln.linalg.vector_norm / matrix_norm."""
    if out is not None:
        raise TypeError("norm(): kiln has no out= tensors; use the returned tensor")
    return _C.norm(input, _float_or_name(p), _dims(dim), keepdim, dtype)


def _float_or_name(ord: float | str | None) -> float | str | None:
    """An order as the binding takes it: ints become floats (2 -> 2.0)."""
    if ord is None or isinstance(ord, str):
        return ord
    return float(ord)


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode: str | None = None) -> Tensor:
    """The p-norm distance between each row of x1 [..., P, M] and each row of
    x2 [..., R, M]: [..., P, R]. Always computed from the differences (torch's
    compute_mode "donot_use_mm_for_euclid_dist"), so compute_mode is accepted
    and changes nothing."""
    return _C.cdist(x1, x2, float(p))


def set_num_threads(num: int) -> None:
    """The number of OpenMP threads kiln's kernels use from now on."""
    if not isinstance(num, int) or num <= 0:
        raise RuntimeError(f"set_num_threads expects a positive integer, got {num!r}")
    _C.set_num_threads(num)


def get_num_threads() -> int:
    """The number of OpenMP threads kiln's kernels use."""
    return int(_C.get_num_threads())


def set_team_busy_fallback(on: bool) -> None:
    """Whether a calling thread's plans and eager ops run on one thread for a
    second when its team's threads waited a quarter of the time or more for
    a core (other programs keeping the cores busy); on by default, or as
    KILN_TEAM_BUSY_FALLBACK=0 says. docs/kernels.md, "Threads"."""
    _C.set_team_busy_fallback(bool(on))


def team_busy_fallback() -> bool:
    return bool(_C.team_busy_fallback())


def team_stats() -> dict:
    """busy_fallbacks: how many times a team has run as one thread for a
    while since the start, its cores being busy; busy_now: whether the
    calling thread's team runs as one now."""
    return {"busy_fallbacks": int(_C.team_busy_fallbacks()), "busy_now": bool(_C.team_busy())}


def set_eager_weight_cache_limit(max_bytes: int) -> None:
    """Eager matmul/linear/addmm that read their weight once (up to 256
    rows) keep its packed form when they see it again at the same version,
    as compiled graphs do (a 512x512 linear at batch 8 ran 1.5x faster, at
    batch 32 1.15x); this caps those copies at `max_bytes`
    (64 MiB by default; the least recently used go first), and 0 turns the
    cache off. A write through kiln ops, NumPy or DLPack is always seen.
    docs/kernels.md, "Eager packed weights"."""
    _C.set_eager_weight_cache_limit(int(max_bytes))


def eager_weight_cache_stats() -> dict:
    """hits (calls that used a packed copy), packs (copies made), entries
    (weights the cache knows now), bytes (held now) and max_bytes."""
    return dict(_C.eager_weight_cache_stats())


def clear_eager_weight_cache() -> None:
    """Frees every packed copy (the counts stay)."""
    _C.clear_eager_weight_cache()


# NumPy's names for the inverse functions, as torch has them too.
ALIASES = {"arcsin": "asin", "arccos": "acos", "arctan": "atan", "arcsinh": "asinh",
           "arccosh": "acosh", "arctanh": "atanh", "arctan2": "atan2"}
arcsin, arccos, arctan = _ops.asin, _ops.acos, _ops.atan
arcsinh, arccosh, arctanh = _ops.asinh, _ops.acosh, _ops.atanh
arctan2 = _ops.atan2

# In-place Tensor methods that are no torch functions.
METHODS = {"scatter_": _scatter_, "index_fill_": _index_fill_, "index_copy_": _index_copy_,
           "masked_scatter_": _masked_scatter_, "lerp_": _lerp_}
