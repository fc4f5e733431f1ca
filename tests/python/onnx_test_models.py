"""Small ONNX models built with onnx.helper, for the import tests: a graph
of nodes as a model of the default op set (IR version 8, which ONNX Runtime
reads for opsets up to 17), typed inputs and outputs, constant tensors."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper


def model_with(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def info(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def const(name, values, dtype=np.int64):
    return numpy_helper.from_array(np.array(values, dtype=dtype), name)
