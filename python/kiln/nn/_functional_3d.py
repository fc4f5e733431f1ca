"""kiln.nn.functional's 3-D convolutions and pools, with torch's signatures:
each is one kiln op (conv3d, conv_transpose3d, max_pool3d, avg_pool3d) over
[N, C, D, H, W] or unbatched [C, D, H, W] inputs; here an int becomes the
list the op takes, nothing more."""
from __future__ import annotations

from collections.abc import Sequence

from kiln import _C
from kiln._C import Tensor

__all__ = ["conv3d", "conv_transpose3d", "max_pool3d", "avg_pool3d"]

IntOrSeq = int | Sequence[int]


def _triple(v: IntOrSeq) -> list[int]:
    return [v] * 3 if isinstance(v, int) else list(v)


def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntOrSeq = 1,
           padding: IntOrSeq | str = 0, dilation: IntOrSeq = 1, groups: int = 1) -> Tensor:
    """padding may be "valid" (none) or "same" (stride 1; an odd total puts
    the extra element last, as torch does)."""
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                             "{'valid', 'same'}")
        if padding == "valid":
            padding = 0
        else:
            if any(s != 1 for s in _triple(stride)):
                raise ValueError("padding='same' is not supported for strided convolutions")
            totals = [d * (k - 1) for d, k in zip(_triple(dilation), weight.shape[2:],
                                                  strict=True)]
            padding = [t // 2 for t in totals]
            odd = [t % 2 for t in totals]
            if any(odd):
                input = _C.nn.pad(input, [p for o in reversed(odd) for p in (0, o)], "constant",
                                  None)
    return _C.dispatch("conv3d", [input, weight, bias],
                       {"stride": _triple(stride), "padding": _triple(padding),
                        "dilation": _triple(dilation), "groups": groups})


def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None,
                     stride: IntOrSeq = 1, padding: IntOrSeq = 0, output_padding: IntOrSeq = 0,
                     groups: int = 1, dilation: IntOrSeq = 1) -> Tensor:
    return _C.dispatch("conv_transpose3d", [input, weight, bias],
                       {"stride": _triple(stride), "padding": _triple(padding),
                        "output_padding": _triple(output_padding), "groups": groups,
                        "dilation": _triple(dilation)})


def max_pool3d(input: Tensor, kernel_size: IntOrSeq, stride: IntOrSeq | None = None,
               padding: IntOrSeq = 0, dilation: IntOrSeq = 1, ceil_mode: bool = False,
               return_indices: bool = False) -> Tensor:
    if return_indices:
        raise NotImplementedError("max_pool3d: return_indices is not supported yet")
    return _C.dispatch("max_pool3d", [input],
                       {"kernel_size": _triple(kernel_size),
                        "stride": [] if stride is None else _triple(stride),
                        "padding": _triple(padding), "dilation": _triple(dilation),
                        "ceil_mode": ceil_mode})


def avg_pool3d(input: Tensor, kernel_size: IntOrSeq, stride: IntOrSeq | None = None,
               padding: IntOrSeq = 0, ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Tensor:
    if divisor_override is not None:
        raise NotImplementedError("avg_pool3d: divisor_override is not supported yet")
    return _C.dispatch("avg_pool3d", [input],
                       {"kernel_size": _triple(kernel_size),
                        "stride": [] if stride is None else _triple(stride),
                        "padding": _triple(padding), "ceil_mode": ceil_mode,
                        "count_include_pad": count_include_pad})
