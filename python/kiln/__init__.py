"""kiln: a small deep-learning framework, shaped like PyTorch.

    import kiln
    x = kiln.randn(2, 3, requires_grad=True)
    (x * x).sum().backward()
"""
from kiln import _C
from kiln._C import Tensor, dtype, dispatch, from_numpy, from_dlpack, manual_seed, is_grad_enabled
from kiln._C import memory_stats, release_cached_memory
from kiln._tensor import install_tensor_methods
from kiln._factories import (tensor, zeros, ones, empty, full, arange, linspace, eye, rand,
                             randn, randint, zeros_like, ones_like, empty_like, full_like,
                             rand_like, randn_like)
from kiln._grad_mode import no_grad, enable_grad, set_grad_enabled
from kiln import autograd
from kiln._ops import *  # noqa: F401,F403  one function per op of the table
from kiln._ops import __all__ as _op_names
from kiln._torch_forms import *  # noqa: F401,F403  PyTorch's forms where they differ

__version__ = "0.1.0"

float32 = dtype.float32
float64 = dtype.float64
int32 = dtype.int32
int64 = dtype.int64
bool = dtype.bool  # noqa: A001  (kiln.bool, as torch.bool)
float = float32  # noqa: A001
double = float64
long = int64
int = int32  # noqa: A001

install_tensor_methods()

from kiln import nn, optim, utils, jit, onnx  # noqa: E402  (they use the ops above)
from kiln.serialization import save, load  # noqa: E402
from kiln.jit import compile  # noqa: E402,A001  (kiln.compile, as torch.compile)
