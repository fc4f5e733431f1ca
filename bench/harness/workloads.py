"""The workloads of SCENARIOS.md as plain data, shared by the driver and every
framework's runner (so this module imports nothing but the standard library).

A model is a list of layers, as the nn.Sequential that builds it in PyTorch
and kiln; a layer's parameters are named by its index, as that Sequential's
state_dict names them ("0.weight", "0.bias", ...). §6's MyModel
(fc1 -> relu -> fc2) is built as the equivalent Sequential, so that every
runner builds every model with one function.

A case is one timed workload: a model at a batch size, either inference (the
model's output is checked) or a training step (forward, cross-entropy with
mean reduction, backward, SGD without momentum; the losses of
STEPS_CHECKED steps from the initial weights and the weights after them are
checked).
"""
from dataclasses import dataclass

LEARNING_RATE = 0.01
# Three steps, so that a tracing JIT that records on its first or second
# call (tinygrad's TinyJit captures on the second) is checked on a replay.
STEPS_CHECKED = 3

# (kind, arguments). linear: (in, out); conv: (in_channels, out_channels,
# kernel, padding); avgpool: (kernel = stride).
MODELS = {
    "W1": [("linear", 512, 256), ("relu",), ("linear", 256, 128), ("relu",),
           ("linear", 128, 2)],
    "LeNet": [("conv", 1, 6, 5, 2), ("sigmoid",), ("avgpool", 2),
              ("conv", 6, 16, 5, 0), ("sigmoid",), ("avgpool", 2),
              ("flatten",),
              ("linear", 16 * 5 * 5, 120), ("sigmoid",),
              ("linear", 120, 84), ("sigmoid",),
              ("linear", 84, 10)],
    "MyModel": [("linear", 10, 5), ("relu",), ("linear", 5, 2)],
}
INPUT_SHAPES = {"W1": (512,), "LeNet": (1, 28, 28), "MyModel": (10,)}


@dataclass(frozen=True)
class Case:
    id: str         # names the case in files and JSON: "W1-b64"
    workload: str   # SCENARIOS.md's name: W1, W2, W3a, W3b
    model: str      # a key of MODELS
    batch: int
    training: bool

    @property
    def title(self):
        what = "train step" if self.training else "inference"
        return f"{self.workload} b{self.batch} ({what})"

    @property
    def input_shape(self):
        return (self.batch, *INPUT_SHAPES[self.model])

    @property
    def classes(self):
        return MODELS[self.model][-1][2]


CASES = [
    Case("W1-b1", "W1", "W1", 1, False),
    Case("W1-b64", "W1", "W1", 64, False),
    Case("W1-b1024", "W1", "W1", 1024, False),
    Case("W2-b1", "W2", "LeNet", 1, False),
    Case("W2-b64", "W2", "LeNet", 64, False),
    Case("W3a-b64", "W3a", "W1", 64, True),
    Case("W3b-b10", "W3b", "MyModel", 10, True),
]
CASES_BY_ID = {case.id: case for case in CASES}


def parameter_shapes(model):
    """[(state_dict name, shape)] in registration order."""
    shapes = []
    for i, layer in enumerate(MODELS[model]):
        if layer[0] == "linear":
            _, n_in, n_out = layer
            shapes += [(f"{i}.weight", (n_out, n_in)), (f"{i}.bias", (n_out,))]
        elif layer[0] == "conv":
            _, c_in, c_out, k, _ = layer
            shapes += [(f"{i}.weight", (c_out, c_in, k, k)), (f"{i}.bias", (c_out,))]
    return shapes


def _layer_shapes(model, batch):
    """[(layer, input shape, output shape)] through the model."""
    shape = (batch, *INPUT_SHAPES[model])
    out = []
    for layer in MODELS[model]:
        kind = layer[0]
        if kind == "linear":
            new = (shape[0], layer[2])
        elif kind == "conv":
            _, _, c_out, k, pad = layer
            new = (shape[0], c_out, shape[2] + 2 * pad - k + 1, shape[3] + 2 * pad - k + 1)
        elif kind == "avgpool":
            new = (shape[0], shape[1], shape[2] // layer[1], shape[3] // layer[1])
        elif kind == "flatten":
            new = (shape[0], _product(shape[1:]))
        else:
            new = shape
        out.append((layer, shape, new))
        shape = new
    return out


def output_shape(case):
    """The shape of the model's output for the case's batch."""
    return _layer_shapes(case.model, case.batch)[-1][2]


def _product(values):
    result = 1
    for v in values:
        result *= v
    return result


def _multiply_add_flops(layer, shape_in, shape_out):
    """2 x the multiply-adds of a linear or conv layer, 0 for the rest."""
    if layer[0] == "linear":
        return 2 * shape_in[0] * layer[1] * layer[2]
    if layer[0] == "conv":
        _, c_in, _, k, _ = layer
        return 2 * _product(shape_out) * c_in * k * k
    return 0


@dataclass(frozen=True)
class Cost:
    """What one call of a case must do at least, for the roofline bound."""
    flops: int          # 2 x multiply-adds of linear and conv layers only
    bytes_moved: int    # see cost_of
    working_set: int    # bytes that are live during the call


def cost_of(case):
    """Flops and bytes a call must move, counted from the model's shapes.

    Inference: each parameter is read once, the input read once, each layer's
    output written once and read once by the next layer (the last one only
    written). Training adds: each activation's gradient written and read
    once, each parameter read again for the backward of the layer's input,
    its gradient written, and the SGD update reading parameter and gradient
    and writing the parameter. Flops count only the multiply-adds of linear
    and conv layers (x2: forward; x3 for training: the backward computes the
    gradient of the weight and of the input, the first layer's input
    gradient excepted), plus 2 per parameter for the update. Elementwise
    ops, pooling and the loss are not counted: the bound stays a lower one.
    """
    layers = _layer_shapes(case.model, case.batch)
    params = sum(_product(s) for _, s in parameter_shapes(case.model))
    input_size = _product(case.input_shape)
    activations = sum(_product(out) for _, _, out in layers)
    forward_flops = sum(_multiply_add_flops(*layer) for layer in layers)
    if not case.training:
        flops = forward_flops
        elements = params + input_size + 2 * activations - _product(layers[-1][2])
        working = params + input_size + activations
    else:
        first_layer_input_grad = _multiply_add_flops(*layers[0])
        flops = 3 * forward_flops - first_layer_input_grad + 2 * params
        elements = 6 * params + input_size + 4 * activations
        working = 2 * params + input_size + 2 * activations
    return Cost(flops=flops, bytes_moved=4 * elements, working_set=4 * working)
