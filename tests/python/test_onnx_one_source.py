"""ONNX translations from one source: the ops whose OpDef declares a
one-to-one ONNX form (OnnxInfo, ops/op.h) import and export through one
generic translator each way, checked against ONNX Runtime; and a model
using ops kiln lacks is refused with one error naming every one of them."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import kiln
from onnx_test_models import info, model_with


def run_ort(path, feeds):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


# ---- every missing op in one error ----

def test_every_missing_op_is_listed_in_one_error_with_node_names_and_counts(tmp_path):
    """Two nodes of an op kiln lacks, one of another domain, one inside an If
    branch, among ops kiln has: one error names the three ops, their nodes,
    and nothing it can translate."""
    then_branch = helper.make_graph(
        [helper.make_node("Unheardof", ["x"], ["t"], name="inner")], "then", [],
        [info("t", [3])])
    else_branch = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["e"], name="fine")], "else", [], [info("e", [3])])
    nodes = [
        helper.make_node("Frobnicate", ["x"], ["a"], name="frob_1"),
        helper.make_node("Relu", ["a"], ["b"], name="relu"),
        helper.make_node("Frobnicate", ["b"], ["c"], name="frob_2"),
        helper.make_node("Custom", ["c"], ["d"], name="vendor", domain="com.example"),
        helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_branch,
                         else_branch=else_branch),
    ]
    model = model_with(nodes, [info("x", [3]), info("cond", [], TensorProto.BOOL)],
                       [info("y", [3]), info("d", [3])])
    path = tmp_path / "missing.onnx"
    onnx.save(model, path)
    with pytest.raises(RuntimeError) as caught:
        kiln.onnx.load(path)
    message = str(caught.value)
    assert "has no kiln translation" in message
    assert "'Frobnicate' (2 nodes: 'frob_1', 'frob_2')" in message
    assert "'com.example:Custom' (node 'vendor')" in message
    assert "'Unheardof' (node 'inner')" in message
    assert "'Relu'" not in message and "'If'" not in message
    # In the order the model first uses them.
    assert message.index("Frobnicate") < message.index("Custom") < message.index("Unheardof")


def test_one_missing_node_keeps_the_one_line_message(tmp_path):
    nodes = [helper.make_node("Frobnicate", ["x"], ["y"], name="only")]
    onnx.save(model_with(nodes, [info("x", [2])], [info("y", [2])]), tmp_path / "one.onnx")
    with pytest.raises(RuntimeError, match=r"op 'Frobnicate' \(node 'only'\) has no kiln "
                                           r"translation"):
        kiln.onnx.load(tmp_path / "one.onnx")


def test_many_nodes_of_one_missing_op_are_counted_and_the_names_cut_short(tmp_path):
    nodes, previous = [], "x"
    for i in range(7):
        nodes.append(helper.make_node("Frobnicate", [previous], [f"v{i}"], name=f"n{i}"))
        previous = f"v{i}"
    nodes.append(helper.make_node("Wibble", [previous], ["y"]))  # unnamed: named by its output
    onnx.save(model_with(nodes, [info("x", [2])], [info("y", [2])]), tmp_path / "many.onnx")
    with pytest.raises(RuntimeError) as caught:
        kiln.onnx.load(tmp_path / "many.onnx")
    message = str(caught.value)
    assert "'Frobnicate' (7 nodes: 'n0', 'n1', 'n2', 'n3', 'n4', ...)" in message
    assert "'n5'" not in message
    assert "'Wibble' (node the one writing 'y')" in message


# ---- the generic importer, against ONNX Runtime ----

def test_one_to_one_ops_import_with_onnx_defaults_and_renamed_attributes(tmp_path):
    """LeakyRelu without alpha means ONNX's 0.01, with alpha kiln's
    negative_slope; Cast's `to` is a dtype; Where, Erf, Reciprocal, IsNaN,
    Floor and the comparisons are kiln's op of the same inputs."""
    nodes = [
        helper.make_node("LeakyRelu", ["x"], ["leaky_default"]),
        helper.make_node("LeakyRelu", ["x"], ["leaky"], alpha=0.3),
        helper.make_node("Elu", ["x"], ["elu"], alpha=0.7),
        helper.make_node("Erf", ["x"], ["erf"]),
        helper.make_node("Reciprocal", ["x"], ["reciprocal"]),
        helper.make_node("Floor", ["x"], ["floor"]),
        helper.make_node("IsNaN", ["x"], ["isnan"]),
        helper.make_node("Less", ["x", "z"], ["less"]),
        helper.make_node("Where", ["less", "x", "z"], ["where"]),
        helper.make_node("Cast", ["x"], ["as_int"], to=TensorProto.INT32),
    ]
    outputs = [info("leaky_default", [4, 5]), info("leaky", [4, 5]), info("elu", [4, 5]),
               info("erf", [4, 5]), info("reciprocal", [4, 5]), info("floor", [4, 5]),
               info("isnan", [4, 5], TensorProto.BOOL), info("less", [4, 5], TensorProto.BOOL),
               info("where", [4, 5]), info("as_int", [4, 5], TensorProto.INT32)]
    path = tmp_path / "generic.onnx"
    onnx.save(model_with(nodes, [info("x", [4, 5]), info("z", [5])], outputs), path)
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((4, 5)) * 3).astype(np.float32)
    x[0, 0] = np.nan
    z = rng.standard_normal(5).astype(np.float32)
    want = run_ort(path, {"x": x, "z": z})
    got = kiln.onnx.load(path)(kiln.from_numpy(x), kiln.from_numpy(z))
    for g, w, o in zip(got, want, outputs):
        g = g.numpy()
        assert g.dtype == w.dtype, o.name
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, equal_nan=True, err_msg=o.name)


def test_a_left_out_float_attribute_is_onnx_float32_default_on_doubles(tmp_path):
    """ONNX's attributes are float32: LeakyRelu's default alpha on a double
    input is 0.01f, bit for bit what ONNX Runtime multiplies by."""
    nodes = [helper.make_node("LeakyRelu", ["x"], ["y"])]
    path = tmp_path / "leaky.onnx"
    onnx.save(model_with(nodes, [info("x", [64], TensorProto.DOUBLE)],
                         [info("y", [64], TensorProto.DOUBLE)]), path)
    x = -np.random.default_rng(1).random(64) * 100
    want = run_ort(path, {"x": x})[0]
    np.testing.assert_array_equal(kiln.onnx.load(path)(kiln.from_numpy(x)).numpy(), want)


def test_bitwise_ops_import_from_opset_18(tmp_path):
    nodes = [helper.make_node("BitwiseAnd", ["a", "b"], ["and"]),
             helper.make_node("BitwiseNot", ["a"], ["not"])]
    outputs = [info("and", [6], TensorProto.INT32), info("not", [6], TensorProto.INT32)]
    inputs = [info("a", [6], TensorProto.INT32), info("b", [6], TensorProto.INT32)]
    path = tmp_path / "bitwise.onnx"
    onnx.save(model_with(nodes, inputs, outputs, opset=18), path)
    a = np.array([0, 1, -1, 7, 12, -8], np.int32)
    b = np.array([3, 3, 5, -1, 10, 6], np.int32)
    want = run_ort(path, {"a": a, "b": b})
    got = kiln.onnx.load(path)(kiln.from_numpy(a), kiln.from_numpy(b))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w)
    # Before opset 18 ONNX has no BitwiseAnd: the declared opset range says so.
    onnx.save(model_with(nodes, inputs, outputs, opset=17), tmp_path / "old.onnx")
    with pytest.raises(RuntimeError, match=r"BitwiseAnd at opset 17 is not one kiln reads "
                                           r"\(it reads opset 18 on\)"):
        kiln.onnx.load(tmp_path / "old.onnx")


# ---- the generic exporter, against ONNX Runtime ----

def test_one_to_one_ops_export_with_renamed_attributes_and_promoted_operands(tmp_path):
    def f(x, n, flags):
        leaky = kiln.nn.functional.leaky_relu(x, 0.2)
        mixed = x + n  # int64 operand promoted to float
        both = flags + flags  # bools compute as int32 and cast back
        return leaky, kiln.erf(x) * mixed, both, (x < n).to(kiln.int32)

    x = kiln.randn(3, 4)
    n = kiln.from_numpy(np.arange(4, dtype=np.int64))
    flags = kiln.from_numpy(np.array([True, False, True, False]))
    traced = kiln.jit.trace(f, (x, n, flags))
    path = tmp_path / "generic.onnx"
    kiln.onnx.export(traced, None, path)
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    leaky = [node for node in model.graph.node if node.op_type == "LeakyRelu"]
    assert len(leaky) == 1
    assert [(a.name, round(a.f, 6)) for a in leaky[0].attribute] == [("alpha", 0.2)]
    feeds = {i.name: a.numpy() for i, a in zip(model.graph.input, (x, n, flags))}
    for got, want in zip(run_ort(path, feeds), f(x, n, flags)):
        want = want.numpy()
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# ---- coverage ----

# Ops of the default domain kiln does not import, each for its data types:
# ImageDecoder reads and writes uint8 images, the others take strings.
NOT_IMPORTED = {"ImageDecoder": "uint8 images (compressed bytes in, pixels out)",
                "RegexFullMatch": "strings", "StringConcat": "strings",
                "StringNormalizer": "strings", "StringSplit": "strings"}


def test_every_default_domain_op_through_opset_21_imports():
    """Issue 24's coverage: every op of ONNX's default domain (opsets up to
    21, deprecated ones aside) is in the importer's table, but those listed
    above with their reason; and none of those listed is imported after all
    (the list must shrink when one is)."""
    import onnx.defs
    ops = {schema.name for schema in onnx.defs.get_all_schemas_with_history()
           if schema.domain in ("", "ai.onnx") and schema.since_version <= 21
           and not schema.deprecated}
    importable = set(kiln.onnx.importable_ops())
    assert sorted(ops - importable - set(NOT_IMPORTED)) == []
    assert sorted(set(NOT_IMPORTED) & importable) == []
