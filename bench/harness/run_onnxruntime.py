"""ONNX Runtime's runner (main .venv), inference only: each model as an ONNX
graph (opset 17) built with onnx.helper from the layer list, holding the
driver's weights as initializers, in an InferenceSession on the CPU
execution provider with intra_op_num_threads = the job's threads
(inter_op 1) and the default graph optimizations. A call is
session.run(None, {"x": x}).

    .venv/bin/python bench/harness/run_onnxruntime.py JOB.json   (started by bench/run_all.py)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from harness import runner  # noqa: E402
from harness.workloads import MODELS, output_shape  # noqa: E402


def model_proto(case, weights):
    """The case's model as a checked ONNX ModelProto with its weights inside."""
    nodes, value = [], "x"
    for i, layer in enumerate(MODELS[case.model]):
        kind, out, params = layer[0], f"h{i}", [f"{i}.weight", f"{i}.bias"]
        if kind == "linear":
            nodes.append(helper.make_node("Gemm", [value, *params], [out], transB=1))
        elif kind == "conv":
            k, pad = layer[3], layer[4]
            nodes.append(helper.make_node("Conv", [value, *params], [out], kernel_shape=[k, k],
                                          pads=[pad] * 4))
        elif kind == "avgpool":
            k = layer[1]
            nodes.append(helper.make_node("AveragePool", [value], [out], kernel_shape=[k, k],
                                          strides=[k, k]))
        elif kind == "flatten":
            nodes.append(helper.make_node("Flatten", [value], [out], axis=1))
        else:
            nodes.append(helper.make_node({"relu": "Relu", "sigmoid": "Sigmoid"}[kind], [value],
                                          [out]))
        value = out
    graph = helper.make_graph(
        nodes, case.model,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(case.input_shape))],
        [helper.make_tensor_value_info(value, TensorProto.FLOAT, list(output_shape(case)))],
        [numpy_helper.from_array(w, name) for name, w in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what opset 17 came with
    onnx.checker.check_model(model, full_check=True)
    return model


def build_modes(job, case):
    x = job.input(case)
    state = {}

    def outputs():
        options = ort.SessionOptions()
        options.intra_op_num_threads = job.threads
        options.inter_op_num_threads = 1
        proto = model_proto(case, job.weights(case.model))
        state["session"] = ort.InferenceSession(proto.SerializeToString(), options,
                                                providers=["CPUExecutionProvider"])
        return {"out": state["session"].run(None, {"x": x})[0]}

    return [runner.Mode("session", "ONNX Runtime", outputs,
                        lambda: state["session"].run(None, {"x": x}))]


if __name__ == "__main__":
    runner.main("onnxruntime", lambda: {"onnxruntime": ort.__version__}, build_modes)
