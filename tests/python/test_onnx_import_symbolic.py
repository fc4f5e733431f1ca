"""ONNX import keeps symbolic input dimensions (issue 21): the PP-OCR models
no one here wrote load with no input_shapes and match ONNX Runtime at
several sizes; shape arithmetic on symbolic sizes is done at import; an op
that needs a concrete size it cannot have says which."""
import importlib.util
import pathlib

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln
from onnx_test_models import model_with

INT64_MAX = np.iinfo(np.int64).max


def rapidocr_model(name):
    spec = importlib.util.find_spec("rapidocr_onnxruntime")  # finds, does not import
    assert spec is not None, "rapidocr-onnxruntime is installed by scripts/setup.sh"
    path = pathlib.Path(spec.submodule_search_locations[0]) / "models" / name
    assert path.exists(), path
    return path


def onnx_runtime(path):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def check_sizes(path, shapes, rtol=1e-4, atol=1e-5):
    """One import, run at every shape in `shapes`, each equal to ONNX Runtime."""
    model = kiln.onnx.load(path)
    session = onnx_runtime(path)
    rng = np.random.RandomState(0)
    outputs = []
    for shape in shapes:
        x = rng.rand(*shape).astype(np.float32)
        want = session.run(None, {session.get_inputs()[0].name: x})[0]
        got = model(kiln.from_numpy(x)).numpy()
        assert got.shape == want.shape, shape
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
        outputs.append((got, want))
    return model, outputs


def test_pp_ocr_classifier_imports_without_input_shapes_at_any_batch_and_size():
    path = rapidocr_model("ch_ppocr_mobile_v2.0_cls_infer.onnx")  # x: [-1, 3, ?, ?]
    model, outputs = check_sizes(path, [(6, 3, 48, 192), (1, 3, 48, 192), (3, 3, 64, 256)])
    # -1 and each "?" are sizes of their own (a height need not equal a width)
    assert model.graph.inputs[0].shape == ("x_0", 3, "x_2", "x_3")
    for got, want in outputs:
        assert (got.argmax(1) == want.argmax(1)).all()


def test_pp_ocr_recognizer_imports_without_input_shapes_at_any_batch_and_width():
    # The text recognizer takes lines 48 pixels high; its Shape/Slice/Concat/
    # Reshape chains (attention heads) run on symbolic batch and width.
    path = rapidocr_model("ch_PP-OCRv4_rec_infer.onnx")
    model, outputs = check_sizes(path, [(1, 3, 48, 320), (2, 3, 48, 160), (3, 3, 48, 96)])
    assert model.graph.inputs[0].shape == ("p2o_DynamicDimension_0", 3, "x_2",
                                          "p2o_DynamicDimension_1")
    for got, want in outputs:
        assert (got.argmax(-1) == want.argmax(-1)).all()
    # It reshapes its feature map to a height of 1, which only some input
    # heights give: a guard every call checks, as ONNX Runtime fails then too
    with pytest.raises(ValueError, match="guard"):
        model(kiln.randn(1, 3, 96, 320))


def ints(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def floats(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.float32), name)


def flatten_model():
    """x.view(x.shape[0], -1) @ w as PyTorch exports it: Shape, Gather,
    Unsqueeze, Concat, Reshape on a symbolic batch."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes0"], ["batch1"]),
        helper.make_node("Concat", ["batch1", "minus_one"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["flat"]),
        helper.make_node("MatMul", ["flat", "w"], ["y"]),
    ]
    rng = np.random.RandomState(3)
    inits = [ints("zero", 0), ints("axes0", [0]), ints("minus_one", [-1]),
             floats("w", rng.randn(24, 5))]
    return model_with(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                            ["batch", 4, 6])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 5])], inits)


def run_both(path, feeds_list, rtol=1e-5, atol=1e-6):
    model = kiln.onnx.load(path)
    session = onnx_runtime(path)
    for feeds in feeds_list:
        wants = session.run(None, feeds)
        gots = model(*[kiln.from_numpy(v) for v in feeds.values()])
        gots = gots if isinstance(gots, tuple) else (gots,)
        for got, want in zip(gots, wants):
            assert got.shape == want.shape
            np.testing.assert_allclose(got.numpy(), want, rtol=rtol, atol=atol)
    return model


def test_shape_gather_unsqueeze_concat_reshape_on_a_symbolic_batch(tmp_path):
    onnx.save(flatten_model(), tmp_path / "flatten.onnx")
    rng = np.random.RandomState(0)
    model = run_both(tmp_path / "flatten.onnx",
                     [{"x": rng.randn(b, 4, 6).astype(np.float32)} for b in (1, 7, 32)])
    assert model.graph.inputs[0].shape == ("batch", 4, 6)
    reshape = [n for n in model.graph.nodes if n.op in ("reshape", "view")]
    assert reshape and reshape[0].attrs["shape"] == ["batch", -1]
    assert reshape[0].output.shape == ("batch", 24)


def arithmetic_model():
    """Shape arithmetic PyTorch exports write: halves of a symbolic length
    (Div), Expand through Where(Equal(shape, -1)), ConstantOfShape, a Slice
    of the data and of the shape, Cast, Mul, Sub."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),  # [batch, 4, seq]
        helper.make_node("Cast", ["shape"], ["shape32"], to=TensorProto.INT32),
        helper.make_node("Slice", ["shape32", "zero", "one"], ["batch32"]),
        helper.make_node("Cast", ["batch32"], ["batch1"], to=TensorProto.INT64),
        helper.make_node("Gather", ["shape", "two"], ["seq"], axis=0),
        helper.make_node("Div", ["seq", "two"], ["half"]),
        helper.make_node("Unsqueeze", ["half", "axes0"], ["half1"]),
        helper.make_node("Concat", ["batch1", "four", "half1", "two1"], ["pairs_shape"], axis=0),
        helper.make_node("Reshape", ["x", "pairs_shape"], ["pairs"]),  # [batch, 4, seq // 2, 2]
        helper.make_node("ReduceSum", ["pairs", "axes3"], ["sums"], keepdims=0),
        helper.make_node("Concat", ["batch1", "four", "half1"], ["sums_shape"], axis=0),
        helper.make_node("Equal", ["sums_shape", "minus_one"], ["unknown"]),
        helper.make_node("Where", ["unknown", "ones3", "sums_shape"], ["expand_shape"]),
        helper.make_node("Expand", ["scale", "expand_shape"], ["scales"]),
        helper.make_node("Mul", ["sums", "scales"], ["scaled"]),
        helper.make_node("ConstantOfShape", ["sums_shape"], ["halves"],
                         value=numpy_helper.from_array(np.array([0.5], np.float32))),
        helper.make_node("Add", ["scaled", "halves"], ["y"]),
        # x[:, :, 1:seq] and x[:, :, seq - 2:], x[:, :, -2:]: slices along the symbolic axis
        helper.make_node("Unsqueeze", ["seq", "axes0"], ["seq1"]),
        helper.make_node("Slice", ["x", "one", "seq1", "two1"], ["tail"]),
        helper.make_node("Sub", ["seq1", "two1"], ["seq_minus_two"]),
        helper.make_node("Slice", ["x", "seq_minus_two", "big", "two1"], ["last2"]),
        helper.make_node("Slice", ["x", "minus_two", "big", "two1"], ["end2"]),
        helper.make_node("Mul", ["last2", "end2"], ["squares"]),
        helper.make_node("ReduceSum", ["squares", "axes3m"], ["end_sum"], keepdims=1),
        helper.make_node("Add", ["tail", "end_sum"], ["z"]),
    ]
    inits = [ints("zero", [0]), ints("one", [1]), ints("two", 2), ints("two1", [2]),
             ints("four", [4]), ints("axes0", [0]), ints("axes3", [3]), ints("axes3m", [-1]),
             ints("minus_one", -1), ints("minus_two", [-2]), ints("ones3", [1, 1, 1]),
             ints("big", [INT64_MAX]), floats("scale", [[[1.0], [2.0], [3.0], [4.0]]])]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, "seq"])
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
               helper.make_tensor_value_info("z", TensorProto.FLOAT, None)]
    return model_with(nodes, [x], outputs, inits)


def test_shape_arithmetic_on_symbolic_sizes_matches_onnx_runtime(tmp_path):
    onnx.save(arithmetic_model(), tmp_path / "arith.onnx")
    rng = np.random.RandomState(1)
    sizes = [(1, 6), (3, 10), (8, 2)]
    model = run_both(tmp_path / "arith.onnx",
                     [{"x": rng.randn(b, 4, s).astype(np.float32)} for b, s in sizes])
    # pairs of seq need an even seq, which ONNX Runtime checks at run time
    # and kiln by a guard on every call
    with pytest.raises(ValueError, match="guard"):
        model(kiln.randn(2, 4, 7))
    # the slices x[..., -2:] and x[..., seq - 2:] need seq >= 2
    with pytest.raises(ValueError, match="guard"):
        model(kiln.randn(2, 4, 0))


def test_inputs_naming_one_size_share_it_and_unnamed_sizes_are_their_own(tmp_path):
    nodes = [helper.make_node("Add", ["a", "b"], ["sum"]),
             helper.make_node("Relu", ["c"], ["r"])]
    inputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", 3]),
              helper.make_tensor_value_info("b", TensorProto.FLOAT, ["batch", 3]),
              helper.make_tensor_value_info("c", TensorProto.FLOAT, ["?", None])]
    outputs = [helper.make_tensor_value_info("sum", TensorProto.FLOAT, None),
               helper.make_tensor_value_info("r", TensorProto.FLOAT, None)]
    onnx.save(model_with(nodes, inputs, outputs), tmp_path / "shared.onnx")
    rng = np.random.RandomState(2)
    feeds = {"a": rng.randn(5, 3), "b": rng.randn(5, 3), "c": rng.randn(2, 7)}
    model = run_both(tmp_path / "shared.onnx",
                     [{k: v.astype(np.float32) for k, v in feeds.items()}])
    assert [v.shape for v in model.graph.inputs] == [("batch", 3), ("batch", 3), ("c_0", "c_1")]
    with pytest.raises(ValueError, match="batch"):
        model(kiln.randn(5, 3), kiln.randn(4, 3), kiln.randn(2, 2))
    # input_shapes still pins sizes: a static import
    static = kiln.onnx.load(tmp_path / "shared.onnx",
                            input_shapes={"a": [5, 3], "b": [5, 3], "c": [2, 7]})
    assert [v.shape for v in static.graph.inputs] == [(5, 3), (5, 3), (2, 7)]


def test_a_size_needed_as_a_number_is_an_error_naming_node_input_and_symbol(tmp_path):
    # "same" padding with stride 2 depends on the height
    conv = model_with(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="stem", auto_pad="SAME_UPPER",
                          strides=[2, 2])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [floats("w", np.zeros((8, 3, 3, 3)))])
    onnx.save(conv, tmp_path / "conv.onnx")
    with pytest.raises(RuntimeError, match=r"node 'stem' \(Conv\): input 'x' has the symbolic "
                                           r"size h along axis 2.*auto_pad SAME_UPPER"):
        kiln.onnx.load(tmp_path / "conv.onnx")
    kiln.onnx.load(tmp_path / "conv.onnx", input_shapes={"x": [1, 3, 33, 33]})  # fixed: fine

    # the batch size as data (a mean by hand): only a run knows it (the size
    # stays a size through the Cast to float; the Div reads it as a tensor)
    mean = model_with(
        [helper.make_node("Shape", ["x"], ["shape"]),
         helper.make_node("Gather", ["shape", "zero"], ["n"], axis=0),
         helper.make_node("Cast", ["n"], ["count"], to=TensorProto.FLOAT),
         helper.make_node("ReduceSum", ["x", "axes0"], ["total"], keepdims=0),
         helper.make_node("Div", ["total", "count"], ["y"], name="by_count")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [ints("zero", 0), ints("axes0", [0])])
    onnx.save(mean, tmp_path / "mean.onnx")
    with pytest.raises(RuntimeError, match=r"node 'by_count' \(Div\): input 'count' holds the "
                                           r"sizes \[batch\].*symbolic size batch"):
        kiln.onnx.load(tmp_path / "mean.onnx")
