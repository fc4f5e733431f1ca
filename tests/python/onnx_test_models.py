"""Small ONNX models built with onnx.helper, for the import tests: a graph
of nodes as a model of the default op set (IR version 8, which ONNX Runtime
reads for opsets up to 17), typed inputs and outputs, constant tensors; and
the check that kiln's import of a model gives ONNX Runtime's outputs."""
import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import kiln


def model_with(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def info(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def const(name, values, dtype=np.int64):
    return numpy_helper.from_array(np.array(values, dtype=dtype), name)


def matches_onnx_runtime(path, feeds_list, rtol=1e-6, atol=1e-6):
    """kiln.onnx.load(path), called on each feed as ONNX Runtime is (every
    input at call time), gives ONNX Runtime's outputs: shapes, dtypes and
    values. Returns the loaded model, for checks of what it built."""
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    model = kiln.onnx.load(path)
    for feeds in feeds_list:
        wants = session.run(None, dict(zip(names, feeds)))
        got = model(*[kiln.from_numpy(np.array(f, copy=True)) for f in feeds])
        got = list(got) if isinstance(got, tuple) else [got]
        assert len(got) == len(wants)
        for g, w in zip(got, wants):
            g = g.numpy()
            assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return model
