"""The recurrent layers, shaped like torch.nn's: RNN, LSTM, GRU and their
cells, with PyTorch's arguments, parameter names (weight_ih_l0,
bias_hh_l1_reverse, ...) and initialization (every parameter drawn from
U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))). The math is kiln's C++
(kiln/nn/rnn.h), one call per forward: one scan per layer and direction,
each step a product and one fused cell op, so a traced LSTM is one loop per
layer instead of a copy of the cell per time step.

RNN, LSTM and GRU also take a PackedSequence (kiln.nn.utils.rnn) and then
return one, with h_n (c_n) each sequence's state at its own last step, as
PyTorch's do; they run the padded batch with a per-step mask that holds each
sequence's state past its end."""
from __future__ import annotations

import math
from typing import Any

from kiln import _C
from kiln._C import Tensor
from kiln._C import dtype as DType
from kiln._factories import rand
from kiln._grad_mode import no_grad
from kiln.nn.module import Module
from kiln.nn.parameter import Parameter
from kiln.nn.utils.rnn import PackedSequence

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _uniform(shape: tuple[int, ...], bound: float, dtype: DType | None) -> Parameter:
    with no_grad():
        return Parameter(rand(*shape, dtype=dtype) * (2.0 * bound) - bound)


def _check_sizes(input_size: int, hidden_size: int) -> None:
    for name, value, least in (("input_size", input_size, 0), ("hidden_size", hidden_size, 1)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} should be of type int, got: {type(value).__name__}")
        if value < least:
            raise ValueError(f"{name} must be {'greater than zero' if least else 'non-negative'}"
                             f", got {value}")


class RNNBase(Module):
    """What RNN, LSTM and GRU share: the parameters, their order (PyTorch's
    _flat_weights) and the call into C++."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device: Any = None,
                 dtype: DType | None = None) -> None:
        super().__init__()
        _check_sizes(input_size, hidden_size)
        if not isinstance(dropout, (int, float)) or isinstance(dropout, bool) or \
                not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError(f"num_layers must be an integer greater than zero, got {num_layers}")
        if proj_size != 0:
            raise NotImplementedError(f"{type(self).__name__}: proj_size={proj_size} is not "
                                      "supported by kiln (only proj_size=0)")
        if device not in (None, "cpu"):
            raise ValueError(f"{type(self).__name__}: kiln runs on the cpu, got device={device!r}")
        self.mode = mode
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first = bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, 0
        gates = _GATES[mode] * hidden_size
        directions = 2 if bidirectional else 1
        bound = 1.0 / math.sqrt(hidden_size)
        names = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else hidden_size * directions
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                shapes: dict[str, tuple[int, ...]] = {"weight_ih": (gates, layer_input),
                                                      "weight_hh": (gates, hidden_size)}
                if bias:
                    shapes.update({"bias_ih": (gates,), "bias_hh": (gates,)})
                for kind, shape in shapes.items():
                    setattr(self, kind + suffix, _uniform(shape, bound, dtype))
                    names.append(kind + suffix)
        self._flat_weights_names = names

    @property
    def _flat_weights(self) -> list[Tensor]:
        return [self.__dict__[name] for name in self._flat_weights_names]

    @property
    def all_weights(self) -> list[list[Tensor]]:
        per = 4 if self.bias else 2
        flat = self._flat_weights
        return [flat[i:i + per] for i in range(0, len(flat), per)]

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        with no_grad():
            for weight in self.parameters():
                weight.copy_(rand(*weight.shape, dtype=weight.dtype) * (2.0 * bound) - bound)

    def _run(self, input: Tensor | PackedSequence, h0: Tensor | None,
             c0: Tensor | None) -> tuple[Any, Tensor, Tensor | None]:
        """(output, h_n, c_n or None); output a PackedSequence when input is one."""
        if not isinstance(input, PackedSequence):
            return _C.rnn_layers(self.mode, input, h0, c0, self._flat_weights, self.bias,
                                 self.num_layers, self.dropout, self.training,
                                 self.bidirectional, self.batch_first)
        data, h_n, c_n = _C.rnn_layers_packed(
            self.mode, input.data, input.batch_sizes, input.sorted_indices,
            input.unsorted_indices, h0, c0, self._flat_weights, self.bias, self.num_layers,
            self.dropout, self.training, self.bidirectional)
        output = PackedSequence(data, input.batch_sizes, input.sorted_indices,
                                input.unsorted_indices)
        return output, h_n, c_n

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class RNN(RNNBase):
    """h_t = tanh(x_t W_ihᵀ + b_ih + h_{t-1} W_hhᵀ + b_hh) (or relu)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device: Any = None,
                 dtype: DType | None = None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             "'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor | PackedSequence,
                hx: Tensor | None = None) -> tuple[Any, Tensor]:
        output, h_n, _ = self._run(input, hx, None)
        return output, h_n


class LSTM(RNNBase):
    """Gates i, f, g, o; returns (output, (h_n, c_n))."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device: Any = None, dtype: DType | None = None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, proj_size, device, dtype)

    def forward(self, input: Tensor | PackedSequence, hx: tuple[Tensor, Tensor] | None = None
                ) -> tuple[Any, tuple[Tensor, Tensor]]:
        h0, c0 = (None, None) if hx is None else hx
        output, h_n, c_n = self._run(input, h0, c0)
        assert c_n is not None
        return output, (h_n, c_n)


class GRU(RNNBase):
    """Gates r, z, n."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device: Any = None, dtype: DType | None = None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, device=device, dtype=dtype)

    def forward(self, input: Tensor | PackedSequence,
                hx: Tensor | None = None) -> tuple[Any, Tensor]:
        output, h_n, _ = self._run(input, hx, None)
        return output, h_n


class RNNCellBase(Module):
    """weight_ih [gates * hidden, input], weight_hh [gates * hidden, hidden],
    bias_ih and bias_hh [gates * hidden] (None without bias)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, gates: int,
                 device: Any = None, dtype: DType | None = None) -> None:
        super().__init__()
        _check_sizes(input_size, hidden_size)
        if device not in (None, "cpu"):
            raise ValueError(f"{type(self).__name__}: kiln runs on the cpu, got device={device!r}")
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        bound = 1.0 / math.sqrt(hidden_size)
        self.weight_ih = _uniform((gates * hidden_size, input_size), bound, dtype)
        self.weight_hh = _uniform((gates * hidden_size, hidden_size), bound, dtype)
        if bias:
            self.bias_ih = _uniform((gates * hidden_size,), bound, dtype)
            self.bias_hh = _uniform((gates * hidden_size,), bound, dtype)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        with no_grad():
            for weight in self.parameters():
                weight.copy_(rand(*weight.shape, dtype=weight.dtype) * (2.0 * bound) - bound)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nonlinearity = getattr(self, "nonlinearity", "tanh")
        if nonlinearity != "tanh":
            s += f", nonlinearity={nonlinearity}"
        return s


class RNNCell(RNNCellBase):
    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device: Any = None,
                 dtype: DType | None = None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             "'relu'.")
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        return _C.rnn_cell(input, hx, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh,
                           self.nonlinearity)


class LSTMCell(RNNCellBase):
    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device: Any = None,
                 dtype: DType | None = None) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input: Tensor,
                hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        h, c = (None, None) if hx is None else hx
        return _C.lstm_cell(input, h, c, self.weight_ih, self.weight_hh, self.bias_ih,
                            self.bias_hh)


class GRUCell(RNNCellBase):
    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device: Any = None,
                 dtype: DType | None = None) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        return _C.gru_cell(input, hx, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
