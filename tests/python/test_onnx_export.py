"""ONNX export checked by the `onnx` checker and by ONNX Runtime: W1 and W2
(with a dynamic batch), and every row of the op test table whose op has an
ONNX translation, compared with kiln's own outputs."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest

import kiln
from gen_refs import all_cases
from kiln import nn
from test_op_table import kiln_operand, make_arrays
from workloads import lenet, w1


def session(path):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def check(path):
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)


@pytest.mark.parametrize("make, shape", [(w1, (1, 512)), (lenet, (1, 1, 28, 28))],
                         ids=["W1", "W2"])
def test_reference_workloads_run_in_onnx_runtime_at_any_batch(tmp_path, make, shape):
    net = make().eval()
    path = tmp_path / "model.onnx"
    kiln.onnx.export(net, kiln.randn(*shape), path, dynamic_axes={"input": {0: "batch"}})
    check(path)
    run = session(path)
    assert run.get_inputs()[0].shape[0] == "batch"
    for batch in (1, 7, 64):
        x = kiln.randn(batch, *shape[1:])
        got = run.run(None, {run.get_inputs()[0].name: x.numpy()})[0]
        with kiln.no_grad():
            np.testing.assert_allclose(got, net(x).numpy(), rtol=1e-4, atol=1e-5)


def test_export_of_a_traced_module_with_several_outputs(tmp_path):
    def f(x, y):
        return kiln.softmax(x @ y, dim=-1), (x * 2).sum(dim=1)

    x, y = kiln.randn(3, 4), kiln.randn(4, 5)
    traced = kiln.jit.trace(f, (x, y))
    kiln.onnx.export(traced, None, tmp_path / "f.onnx", output_names=["probs", "total"])
    check(tmp_path / "f.onnx")
    run = session(tmp_path / "f.onnx")
    assert [o.name for o in run.get_outputs()] == ["probs", "total"]
    got = run.run(None, {"x": x.numpy(), "y": y.numpy()})
    for g, want in zip(got, f(x, y)):
        np.testing.assert_allclose(g, want.numpy(), rtol=1e-5, atol=1e-6)


def test_export_writes_only_the_initializers_nodes_read(tmp_path):
    # A batch norm's num_batches_tracked is a buffer of the module that an
    # eval-mode graph never reads: ONNX Runtime warns about each unused
    # initializer, so the file must not hold it (torch.onnx drops them too).
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()).eval()
    path = tmp_path / "bn.onnx"
    kiln.onnx.export(net, kiln.randn(1, 3, 8, 8), path)
    check(path)
    graph = onnx.load(str(path)).graph
    read = {name for node in graph.node for name in node.input}
    unread = [init.name for init in graph.initializer if init.name not in read]
    assert unread == []
    assert not any("num_batches_tracked" in init.name for init in graph.initializer)


def test_ops_without_a_translation_fail_naming_the_op(tmp_path):
    def f(grad):  # a backward op: inference graphs do not hold them
        return kiln._C.dispatch("pad_backward", [grad],
                                {"input_size": [2, 3], "pad": [1, 1], "mode": "reflect"})

    with pytest.raises(RuntimeError, match="op 'pad_backward' has no ONNX translation"):
        kiln.onnx.export(f, (kiln.randn(2, 5),), tmp_path / "f.onnx")
    with pytest.raises(ValueError, match=r"asks for dim 1 to be dynamic, but the model needs "
                                         r"it to be 512"):
        kiln.onnx.export(w1(), kiln.randn(1, 512), tmp_path / "w.onnx",
                         dynamic_axes={"input": {1: "features"}})
    with pytest.raises(ValueError, match="opset_version 9 is not one kiln writes"):
        kiln.onnx.export(w1(), kiln.randn(1, 512), tmp_path / "w.onnx", opset_version=9)
    with pytest.raises(RuntimeError, match="batch_norm in training mode"):
        kiln.onnx.export(nn.BatchNorm1d(3), kiln.randn(4, 3), tmp_path / "b.onnx",
                         training=kiln.onnx.TrainingMode.TRAINING)


ROWS = [c for c in all_cases() if c.error is None and kiln.onnx.can_export(c.op)]

# Rows where ONNX Runtime 1.30 computes something else than kiln (and
# PyTorch): its max/min reductions (and MaxPool) skip NaN instead of
# propagating it, its ReduceMean of nothing is 0 rather than NaN, its Gemm
# with an empty inner dimension drops beta, and its TopK (which sort, argsort and topk
# export as) has no order for NaN, where PyTorch puts NaN above +inf.
ORT_DIFFERS = {"mean/empty_nan", "amax/nan", "amin/nan", "max/nan_first", "min/nan",
               "argmax/nan", "addmm/empty_k",
               "sort/nan", "sort/nan_desc_f64", "argsort/nan_desc", "topk/nan_largest",
               "topk/nan_smallest", "max_pool2d_nhwc/nan_wins"}


def marked(case):
    if case.case_id() in ORT_DIFFERS:
        return pytest.param(case, marks=pytest.mark.xfail(strict=True,
                                                          reason="ONNX Runtime differs"))
    return case


@pytest.mark.parametrize("case", [marked(c) for c in ROWS], ids=[c.case_id() for c in ROWS])
def test_op_row_runs_in_onnx_runtime(tmp_path, case):
    arrays = make_arrays(case)
    operands = [kiln_operand(a, s) for a, s in zip(arrays, case.inputs)]
    positions = [i for i, o in enumerate(operands) if isinstance(o, kiln.Tensor)]

    def row(*tensors):
        args = list(operands)
        for i, tensor in zip(positions, tensors):
            args[i] = tensor
        result = kiln._C.dispatch(case.op, args, case.attrs)
        return tuple(result) if isinstance(result, tuple) else result

    inputs = tuple(operands[i].contiguous() for i in positions)
    with kiln.no_grad():
        traced = kiln.jit.trace(row, inputs)
        want = traced(*inputs)
    want = list(want) if isinstance(want, tuple) else [want]
    path = tmp_path / "row.onnx"
    try:
        kiln.onnx.export(traced, None, path)
    except RuntimeError as e:  # attributes ONNX cannot express are refused by name
        assert "onnx export" in str(e)
        pytest.skip(str(e))
    check(path)
    try:
        run = session(path)
    except Exception as e:  # ONNX Runtime lacks a kernel for some op/dtype pairs
        if "NOT_IMPLEMENTED" in str(e) or "Could not find an implementation" in str(e):
            pytest.skip(f"ONNX Runtime: {str(e)[:200]}")
        raise
    feeds = {i.name: t.numpy() for i, t in zip(run.get_inputs(), inputs)}
    got = run.run(None, feeds)
    compared = case.compare_outputs or range(len(want))
    for k in compared:
        expected = want[k].numpy()
        assert got[k].shape == expected.shape and got[k].dtype == expected.dtype
        if expected.dtype.kind in "biu":
            np.testing.assert_array_equal(got[k], expected)
        else:
            # Another runtime sums in another order: an absolute slack for
            # results that cancel to near zero (W1's 512-long dot products).
            np.testing.assert_allclose(got[k], expected, rtol=1e-4, atol=1e-4, equal_nan=True)
