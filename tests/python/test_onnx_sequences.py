"""ONNX sequences and optionals in kiln's importer: models built with
onnx.helper run in kiln and in ONNX Runtime. kiln holds a sequence as its
tensors, known in number at import; a sequence or optional input is given as
a list of tensors (or None) and the graph is imported per number and shapes
of them; outputs come back as lists (or None)."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import kiln
from onnx_test_models import info, model_with

FLOAT_SEQ = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, None))


def seq_info(name):
    return helper.make_value_info(name, FLOAT_SEQ)


def const(name, values, dtype=TensorProto.INT64):
    values = np.asarray(values)
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(
        name + "_t", dtype, values.shape, values.flatten().tolist()))


def run_both(model, tmp_path, feeds):
    """kiln's outputs and ONNX Runtime's, as lists (a sequence as a list)."""
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)
    loaded = kiln.onnx.load(path)
    args = [[kiln.from_numpy(a) for a in v] if isinstance(v, list) else kiln.from_numpy(v)
            for v in feeds.values()]
    got = loaded(*args)
    got = list(got) if isinstance(got, tuple) else [got]
    return got, want


def assert_same(got, want):
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w)
        return
    got = got.detach().numpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


RNG = np.random.default_rng(0)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def test_construct_at_erase_insert_length(tmp_path):
    nodes = [
        helper.make_node("SequenceConstruct", ["a", "b", "c"], ["s"]),
        const("neg1", -1), const("one", 1), const("zero", 0),
        helper.make_node("SequenceAt", ["s", "neg1"], ["last"]),
        helper.make_node("SequenceErase", ["s", "one"], ["s2"]),          # [a, c]
        helper.make_node("SequenceInsert", ["s2", "b", "zero"], ["s3"]),  # [b, a, c]
        helper.make_node("SequenceInsert", ["s3", "a"], ["s4"]),          # [b, a, c, a]
        helper.make_node("SequenceErase", ["s4"], ["s5"]),                # [b, a, c]
        helper.make_node("SequenceLength", ["s5"], ["n"]),
        helper.make_node("ConcatFromSequence", ["s5"], ["cat"], axis=1),
        helper.make_node("ConcatFromSequence", ["s5"], ["stacked"], axis=-1, new_axis=1),
    ]
    model = model_with(nodes, [info(x, [2, 3]) for x in "abc"],
                       [info("last", [2, 3]), info("n", [], TensorProto.INT64),
                        info("cat", [2, 9]), info("stacked", [2, 3, 3])])
    got, want = run_both(model, tmp_path, {x: rand(2, 3) for x in "abc"})
    assert_same(got, want)


@pytest.mark.parametrize("split,keepdims", [(None, 1), (None, 0), (2, 1), ([1, 3, 1], 1)])
def test_split_to_sequence(tmp_path, split, keepdims):
    nodes, inputs = [], ["x"]
    if split is not None:
        nodes.append(const("split", split))
        inputs.append("split")
    nodes += [helper.make_node("SplitToSequence", inputs, ["s"], axis=-1, keepdims=keepdims),
              helper.make_node("SequenceLength", ["s"], ["n"])]
    model = model_with(nodes, [info("x", [2, 5])], [seq_info("s"),
                                                    info("n", [], TensorProto.INT64)])
    got, want = run_both(model, tmp_path, {"x": rand(2, 5)})
    assert_same(got, want)


def test_sequence_input_and_output_per_length(tmp_path):
    """A sequence input is a list; each length and shape is a graph of its own."""
    nodes = [const("zero", 0),
             helper.make_node("SequenceInsert", ["s", "t", "zero"], ["out"]),
             helper.make_node("SequenceLength", ["s"], ["n"])]
    model = model_with(nodes, [seq_info("s"), info("t", [3])],
                       [seq_info("out"), info("n", [], TensorProto.INT64)])
    for length in (0, 1, 3):
        feeds = {"s": [rand(3) for _ in range(length)], "t": rand(3)}
        got, want = run_both(model, tmp_path, feeds)
        assert_same(got, want)


def test_sequence_map_over_a_sequence_and_a_tensor(tmp_path):
    body = helper.make_graph([helper.make_node("Add", ["e", "y"], ["o"]),
                              helper.make_node("Shape", ["e"], ["shape"])], "body",
                             [info("e", ["n"]), info("y", ["n"])],
                             [info("o", ["n"]), info("shape", [1], TensorProto.INT64)])
    node = helper.make_node("SequenceMap", ["s", "y"], ["out", "shapes"], body=body)
    shape_seq = helper.make_sequence_type_proto(
        helper.make_tensor_type_proto(TensorProto.INT64, None))
    model = model_with([node], [seq_info("s"), info("y", [4])],
                       [seq_info("out"), helper.make_value_info("shapes", shape_seq)])
    got, want = run_both(model, tmp_path, {"s": [rand(4), rand(4)], "y": rand(4)})
    assert_same(got, want)


def test_loop_carrying_a_sequence_is_unrolled(tmp_path):
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
         helper.make_node("Mul", ["x", "fi"], ["scaled"]),
         helper.make_node("SequenceInsert", ["seq_in", "scaled"], ["seq_out"])],
        "body", [info("i", [], TensorProto.INT64), info("cond_in", [], TensorProto.BOOL),
                 seq_info("seq_in")],
        [info("cond_out", [], TensorProto.BOOL), seq_info("seq_out")])
    nodes = [const("trip", 3), const("cond", True, TensorProto.BOOL),
             helper.make_node("SequenceEmpty", [], ["empty"], dtype=TensorProto.FLOAT),
             helper.make_node("Loop", ["trip", "cond", "empty"], ["seq"], body=body),
             helper.make_node("ConcatFromSequence", ["seq"], ["y"], axis=0, new_axis=1)]
    model = model_with(nodes, [info("x", [2])], [info("y", [3, 2])])
    got, want = run_both(model, tmp_path, {"x": rand(2)})
    assert_same(got, want)


def test_optional_of_a_tensor(tmp_path):
    nodes = [helper.make_node("Optional", ["x"], ["o"]),
             helper.make_node("OptionalHasElement", ["o"], ["has"]),
             helper.make_node("OptionalGetElement", ["o"], ["y"])]
    model = model_with(nodes, [info("x", [2, 2])],
                       [info("has", [], TensorProto.BOOL), info("y", [2, 2])], opset=18)
    got, want = run_both(model, tmp_path, {"x": rand(2, 2)})
    assert_same(got, want)


def test_optional_input_present_or_none(tmp_path):
    optional = helper.make_optional_type_proto(
        helper.make_tensor_type_proto(TensorProto.FLOAT, [3]))
    model = model_with([helper.make_node("OptionalHasElement", ["o"], ["has"]),
                        helper.make_node("Identity", ["o"], ["same"])],
                       [helper.make_value_info("o", optional)],
                       [info("has", [], TensorProto.BOOL),
                        helper.make_value_info("same", optional)], opset=18)
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = rand(3)
    want_has, want_same = session.run(None, {"o": x})
    loaded = kiln.onnx.load(path)
    has, same = loaded(kiln.from_numpy(x))
    assert bool(has.item()) == bool(want_has)
    np.testing.assert_array_equal(same.numpy(), want_same)
    has, same = loaded(None)  # an empty optional
    assert not bool(has.item()) and same is None


def test_position_out_of_range_is_an_error(tmp_path):
    nodes = [helper.make_node("SequenceConstruct", ["a"], ["s"]), const("two", 2),
             helper.make_node("SequenceAt", ["s", "two"], ["y"])]
    model = model_with(nodes, [info("a", [2])], [info("y", [2])])
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(IndexError, match="SequenceAt's position 2 is out of range"):
        kiln.onnx.load(path)


def test_a_list_for_a_tensor_input_is_an_error(tmp_path):
    model = model_with([helper.make_node("SequenceInsert", ["s", "t"], ["out"])],
                       [seq_info("s"), info("t", [3])], [seq_info("out")])
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    loaded = kiln.onnx.load(path)
    with pytest.raises(ValueError, match="input 't' is a tensor"):
        loaded([kiln.from_numpy(rand(3))], [kiln.from_numpy(rand(3))])


def test_split_from_an_input_of_a_symbolic_axis(tmp_path):
    """A 1-D split given at call time is specialized on; the axis may stay
    symbolic (that the split sums to it is a guard)."""
    nodes = [helper.make_node("SplitToSequence", ["x", "split"], ["s"]),
             helper.make_node("SequenceLength", ["s"], ["n"])]
    model = model_with(nodes, [info("x", ["len", 2]), info("split", [3], TensorProto.INT64)],
                       [seq_info("s"), info("n", [], TensorProto.INT64)])
    for x, split in ((rand(6, 2), [1, 2, 3]), (rand(4, 2), [0, 3, 1])):
        got, want = run_both(model, tmp_path, {"x": x, "split": np.array(split, np.int64)})
        assert_same(got, want)


def test_one_graph_per_length_and_specialize_takes_the_tensors_flat(tmp_path):
    model = model_with([helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)],
                       [seq_info("s")], [info("y", ["n"])])
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    loaded = kiln.onnx.load(path)
    a, b, c = (rand(2), rand(3), rand(2))
    for parts in ([a, b], [a], [a, b], [c, a]):  # [c, a] has the shapes of [a, a]: a new graph
        got = loaded([kiln.from_numpy(p) for p in parts])
        np.testing.assert_array_equal(got.numpy(), np.concatenate(parts))
    assert loaded.num_specializations == 3
    traced = loaded.specialize([kiln.from_numpy(a), kiln.from_numpy(b)])
    d = rand(3)  # the graph of [a, b] takes tensors of their shapes, flat
    np.testing.assert_array_equal(traced(kiln.from_numpy(c), kiln.from_numpy(d)).numpy(),
                                  np.concatenate([c, d]))


def test_if_giving_sequences_specializes_on_its_condition(tmp_path):
    def branch(name, node_type):
        return helper.make_graph([helper.make_node(node_type, ["x", "x"], ["e"]),
                                  helper.make_node("SequenceConstruct", ["e", "x"], ["out"])],
                                 name, [], [seq_info("out")])
    node = helper.make_node("If", ["cond"], ["s"], then_branch=branch("then", "Add"),
                            else_branch=branch("else", "Mul"))
    model = model_with([node, helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)],
                       [info("cond", [], TensorProto.BOOL), info("x", [2])], [info("y", [4])])
    x = rand(2)
    for cond in (True, False):
        got, want = run_both(model, tmp_path, {"cond": np.array(cond), "x": x})
        assert_same(got, want)
    path = tmp_path / "model.onnx"
    assert kiln.onnx.load(path).value_inputs == ["cond"]
