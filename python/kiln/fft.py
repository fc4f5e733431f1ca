"""kiln.fft: torch.fft's fft, ifft, rfft and irfft, and kiln.stft, over the
op `dft` (an FFT of any length: radix-2, or Bluestein's algorithm for
lengths that are not powers of two).

kiln has no complex dtypes. A complex tensor is its torch.view_as_real form:
a real tensor with a trailing dim of 2 holding [real, imaginary]. So

    kiln.fft.fft(x)     == torch.view_as_real(torch.fft.fft(x))      x real
    kiln.fft.rfft(x)    == torch.view_as_real(torch.fft.rfft(x))     x real
    kiln.fft.ifft(X)    == torch.view_as_real(torch.fft.ifft(torch.view_as_complex(X)))
    kiln.fft.irfft(X)   == torch.fft.irfft(torch.view_as_complex(X))

fft and rfft take real signals (a complex signal's forward transform is not
bound: fft cannot tell a real tensor whose last dim is 2 from a complex
one); ifft and irfft take spectra in the [..., 2] form, and their `dim`
counts the dims of the complex tensor (the trailing 2 excluded), as torch's
does. stft needs return_complex=False and returns the [..., 2] form, as
torch.stft(..., return_complex=False) does."""
from __future__ import annotations

import math

import kiln
from kiln import _missing
from kiln._C import Tensor

__all__ = ["fft", "ifft", "rfft", "irfft", "stft"]


def _axis(dim: int, ndim: int, name: str) -> int:
    if not -max(ndim, 1) <= dim < max(ndim, 1):
        raise IndexError(f"{name}: Dimension out of range (expected to be in range of "
                         f"[{-max(ndim, 1)}, {max(ndim, 1) - 1}], but got {dim})")
    return dim + ndim if dim < 0 else dim


def _length(n: int | None, name: str) -> int:
    if n is None:
        return 0
    if n < 1:
        raise RuntimeError(f"{name}: Invalid number of data points ({n}) specified")
    return n


def _scale(out: Tensor, n: int, norm: str | None, forward: bool, name: str) -> Tensor:
    """torch's norm modes over the unscaled forward and the 1/n inverse the op gives."""
    if norm is None or norm == "backward":
        return out
    if norm == "ortho":
        return out * (1 / math.sqrt(n)) if forward else out * math.sqrt(n)
    if norm == "forward":
        return out * (1 / n) if forward else out * float(n)
    raise ValueError(f"{name}: Invalid normalization mode: {norm}")


def _spectrum(input: Tensor, name: str) -> None:
    if input.dim() < 2 or input.shape[-1] != 2:
        raise ValueError(f"{name}: expected a complex tensor as torch.view_as_real gives it "
                         f"([..., 2]: real and imaginary parts), got shape {list(input.shape)}")


def fft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The DFT of the real signal `input` along dim, of length n (zero-padded
    or cut): [..., n, ..., 2]."""
    axis = _axis(dim, input.dim(), "fft_fft")
    out = kiln.dft(input.unsqueeze(-1), axis=axis, length=_length(n, "fft_fft"))
    return _scale(out, out.shape[axis], norm, True, "fft_fft")


def ifft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The inverse DFT of the spectrum `input` [..., 2] along dim (of the
    complex tensor): [..., n, ..., 2]."""
    _spectrum(input, "fft_ifft")
    axis = _axis(dim, input.dim() - 1, "fft_ifft")
    out = kiln.dft(input, axis=axis, length=_length(n, "fft_ifft"), inverse=True)
    return _scale(out, out.shape[axis], norm, False, "fft_ifft")


def rfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The n // 2 + 1 nonnegative-frequency bins of the real signal's DFT: [..., 2]."""
    axis = _axis(dim, input.dim(), "fft_rfft")
    length = _length(n, "fft_rfft") or input.shape[axis]
    out = kiln.dft(input.unsqueeze(-1), axis=axis, length=length, onesided=True)
    return _scale(out, length, norm, True, "fft_rfft")


def irfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The real signal of length n (default 2 (m - 1)) whose rfft is the m
    bins of `input` [..., m, ..., 2]."""
    _spectrum(input, "fft_irfft")
    axis = _axis(dim, input.dim() - 1, "fft_irfft")
    length = _length(n, "fft_irfft") or 2 * (input.shape[axis] - 1)
    if length < 1:
        raise RuntimeError(f"fft_irfft: Invalid number of data points ({length}) specified")
    out = kiln.dft(input, axis=axis, length=length, inverse=True, onesided=True)
    return _scale(out.squeeze(-1), length, norm, False, "fft_irfft")


def _frames(x: Tensor, n_fft: int, hop: int) -> Tensor:
    """[B, L] -> [B, frames, n_fft]: frame f holds samples f * hop + [0, n_fft)."""
    count = 1 + (x.shape[-1] - n_fft) // hop
    index = (kiln.arange(count) * hop).unsqueeze(1) + kiln.arange(n_fft).unsqueeze(0)
    return kiln.index_select(x, 1, index.reshape(-1)).reshape(x.shape[0], count, n_fft)


def stft(input: Tensor, n_fft: int, hop_length: int | None = None,
         win_length: int | None = None, window: Tensor | None = None, center: bool = True,
         pad_mode: str = "reflect", normalized: bool = False, onesided: bool | None = None,
         return_complex: bool | None = None) -> Tensor:
    """torch.stft of a real signal [L] or [B, L], as return_complex=False
    gives it: [B?, freq, frames, 2]."""
    if return_complex is None:
        raise RuntimeError("stft requires the return_complex parameter be given for real inputs, "
                           "and will further require that return_complex=True in a future "
                           "PyTorch release.")
    if return_complex:
        raise ValueError("stft: kiln has no complex dtypes; pass return_complex=False for the "
                         "torch.view_as_real form [..., freq, frames, 2]")
    if input.dim() not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, got shape {list(input.shape)}")
    hop = n_fft // 4 if hop_length is None else hop_length
    win = n_fft if win_length is None else win_length
    if hop <= 0 or not 0 < win <= n_fft:
        raise RuntimeError(f"stft: expected 0 < hop_length and 0 < win_length <= n_fft, got "
                           f"hop_length={hop}, win_length={win}, n_fft={n_fft}")
    x = input.reshape(1, -1) if input.dim() == 1 else input
    if center:
        pad = n_fft // 2
        x = kiln.nn.functional.pad(x.unsqueeze(1), [pad, pad], mode=pad_mode).squeeze(1)
    if not 0 < n_fft <= x.shape[-1]:
        raise RuntimeError(f"stft: expected 0 < n_fft <= {x.shape[-1]}, but got n_fft={n_fft}")
    frames = _frames(x, n_fft, hop)
    if window is not None:
        if window.dim() != 1 or window.shape[0] != win:
            raise RuntimeError(f"stft: expected a 1D window tensor of size equal to "
                               f"win_length={win}, but got window with size {list(window.shape)}")
        left = (n_fft - win) // 2
        frames = frames * kiln.nn.functional.pad(window, [left, n_fft - win - left])
    elif win < n_fft:
        left = (n_fft - win) // 2
        frames = kiln.nn.functional.pad(frames[..., left:left + win], [left, n_fft - win - left])
    out = kiln.dft(frames.unsqueeze(-1), axis=2, length=n_fft,
                   onesided=True if onesided is None else onesided)
    if normalized:
        out = out * (1 / math.sqrt(n_fft))
    out = out.transpose(1, 2)
    return out.squeeze(0) if input.dim() == 1 else out


__getattr__ = _missing.module_getattr("kiln.fft", "torch.fft")
