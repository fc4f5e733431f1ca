"""kiln: a small deep-learning framework, shaped like PyTorch.

    import kiln
    x = kiln.randn(2, 3, requires_grad=True)
    (x * x).sum().backward()
"""
from kiln import _C, _random, autograd
from kiln._C import (
    Tensor,
    dispatch,
    dtype,
    from_dlpack,
    from_numpy,
    is_grad_enabled,
    memory_stats,
    promote_types,
    release_cached_memory,
)
from kiln._control_flow import cond, fori_loop, scan, while_loop
from kiln._device import device
from kiln._engine import *  # noqa: F401,F403  set_execution, execution, synchronize, ...
from kiln._engine import install_tensor_methods as _install_engine_methods
from kiln._factories import (
    arange,
    empty,
    empty_like,
    eye,
    full,
    full_like,
    linspace,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    tensor,
    zeros,
    zeros_like,
)
from kiln._grad_mode import enable_grad, no_grad, set_grad_enabled
from kiln._ops import *  # noqa: F401,F403  one function per op of the table
from kiln._random import *  # noqa: F401,F403  Generator, generator= draws, rng state
from kiln._tensor import install_tensor_methods as _install_tensor_methods
from kiln._torch_forms import *  # noqa: F401,F403  PyTorch's forms where they differ

__version__ = "0.1.0"

float32 = dtype.float32
float64 = dtype.float64
int32 = dtype.int32
int64 = dtype.int64
int16 = dtype.int16
int8 = dtype.int8
uint8 = dtype.uint8
bool = dtype.bool  # noqa: A001  (kiln.bool, as torch.bool)
float = float32  # noqa: A001
double = float64
long = int64
int = int32  # noqa: A001
short = int16

_install_tensor_methods()
_random.install_tensor_methods()
_install_engine_methods()

from kiln import cuda, fft, jit, linalg, nn, onnx, optim, profiler, utils, vision  # noqa: E402  (they use the ops above)
from kiln import serialization as _serialization  # noqa: E402
from kiln.fft import stft  # noqa: E402  (kiln.stft, as torch.stft)
from kiln.jit import compile  # noqa: E402,A001  (kiln.compile, as torch.compile)
from kiln.serialization import load, save  # noqa: E402

_serialization.install_copying()

from kiln import _missing  # noqa: E402

_missing.install_tensor_getattr()
__getattr__ = _missing.module_getattr("kiln", "torch")
