"""kiln.nn: Module (subclassable, as torch.nn.Module), Parameter, the layers
(recurrent ones included) and losses, and kiln.nn.functional."""
from kiln._missing import module_getattr
from kiln.nn import functional, init, utils
from kiln.nn.activation import ELU, Hardsigmoid, Hardswish, Hardtanh, Mish, ReLU6, SiLU, Softplus
from kiln.nn.containers import ModuleDict, ParameterDict, ParameterList
from kiln.nn.conv_resample import (
    CircularPad1d,
    CircularPad2d,
    ConstantPad1d,
    ConstantPad2d,
    Conv1d,
    Conv2d,
    ConvTranspose1d,
    ConvTranspose2d,
    GroupNorm,
    InstanceNorm1d,
    InstanceNorm2d,
    PixelShuffle,
    PixelUnshuffle,
    ReflectionPad1d,
    ReflectionPad2d,
    ReplicationPad1d,
    ReplicationPad2d,
    Upsample,
    UpsamplingBilinear2d,
    UpsamplingNearest2d,
    ZeroPad1d,
    ZeroPad2d,
)
from kiln.nn.layers import (
    GELU,
    AdaptiveAvgPool2d,
    AvgPool2d,
    BatchNorm1d,
    BatchNorm2d,
    Dropout,
    Embedding,
    Flatten,
    Identity,
    LayerNorm,
    LeakyReLU,
    Linear,
    LogSoftmax,
    MaxPool2d,
    ModuleList,
    ReLU,
    Sequential,
    Sigmoid,
    Softmax,
    Tanh,
)
from kiln.nn.loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CosineEmbeddingLoss,
    CrossEntropyLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from kiln.nn.module import Module
from kiln.nn.parameter import Parameter
from kiln.nn.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from kiln.nn.transformer import (
    MultiheadAttention,
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ = ["functional", "init", "utils", "Module", "Parameter", "AdaptiveAvgPool2d",
           "AvgPool2d", "BatchNorm1d", "BatchNorm2d", "BCEWithLogitsLoss", "Conv2d",
           "CrossEntropyLoss", "Dropout", "Embedding", "Flatten", "GELU", "Identity", "L1Loss",
           "LayerNorm", "LeakyReLU", "Linear", "LogSoftmax", "MaxPool2d", "ModuleList",
           "MSELoss", "NLLLoss", "ReLU", "Sequential", "Sigmoid", "Softmax", "Tanh", "RNNBase",
           "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell", "ELU",
           "Hardsigmoid", "Hardswish", "Hardtanh", "Mish", "ReLU6", "SiLU", "Softplus",
           "ModuleDict", "ParameterDict", "ParameterList", "MultiheadAttention", "Transformer",
           "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
           "TransformerDecoderLayer", "BCELoss", "SmoothL1Loss", "HuberLoss", "KLDivLoss",
           "CosineEmbeddingLoss", "Conv1d", "ConvTranspose1d", "ConvTranspose2d", "GroupNorm",
           "InstanceNorm1d", "InstanceNorm2d", "Upsample", "UpsamplingNearest2d",
           "UpsamplingBilinear2d", "PixelShuffle", "PixelUnshuffle", "ZeroPad1d", "ZeroPad2d",
           "ConstantPad1d", "ConstantPad2d", "ReflectionPad1d", "ReflectionPad2d",
           "ReplicationPad1d", "ReplicationPad2d", "CircularPad1d", "CircularPad2d"]

__getattr__ = module_getattr("kiln.nn", "torch.nn")
