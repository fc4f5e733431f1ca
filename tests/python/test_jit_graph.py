"""The graph IR from Python: walking a compiled graph, rewriting a copy of it
(replace an op, insert a node, erase a node), the verifier, and running the
result; calls from many threads; memory returning to the allocator."""
import gc
import threading

import pytest

import kiln
from kiln import nn


def mlp():
    kiln.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def test_walk_nodes_inputs_outputs_and_attributes():
    traced = kiln.jit.trace(lambda x: kiln.softmax(x * 2, dim=1), kiln.randn(2, 3))
    g = traced.graph
    assert [n.op for n in g.nodes] == ["mul", "softmax"]
    mul, softmax = g.nodes
    assert softmax.attrs == {"dim": 1}
    assert softmax.inputs == [mul.output]
    assert mul.inputs[0] == g.inputs[0] and g.inputs[0].name == "x"
    assert mul.inputs[1].kind == "const" and mul.inputs[1].data.item() == 2
    assert g.outputs == [softmax.output]
    out = softmax.output
    assert (out.dtype, out.shape, out.kind) == (kiln.float32, (2, 3), "node output")
    assert out.producer == softmax and mul.output.uses == [(softmax, 0)]
    assert "softmax" in repr(softmax) and "f32[2, 3]" in repr(out)
    assert "digraph" in g.to_dot()


def test_replace_an_op():
    net = mlp()
    x = kiln.randn(5, 8)
    traced = kiln.jit.trace(net, x, optimize=False)  # as recorded: linear, relu, linear
    g = traced.graph.clone()
    for node in g.nodes:
        if node.op == "relu":
            sigmoid = g.insert("sigmoid", node.inputs, before=node)
            node.output.replace_all_uses_with(sigmoid.output)
            g.erase(node)
    g.verify()
    assert [n.op for n in g.nodes] == ["linear", "sigmoid", "linear"]
    rewritten = traced.with_graph(g)
    expected = net[2](kiln.sigmoid(net[0](x)))
    assert kiln.equal(rewritten(x), expected)
    assert kiln.equal(traced(x), net(x))  # the original is untouched


def test_insert_a_node_and_change_the_outputs():
    traced = kiln.jit.trace(lambda x: x + 1, kiln.randn(4))
    g = traced.graph.clone()
    (add,) = g.nodes
    half = g.constant(kiln.tensor(0.5))
    scaled = g.insert("mul", [add.output, half])
    g.set_outputs([add.output, scaled.output])
    compiled = kiln.jit.from_graph(g)
    x = kiln.randn(4)
    a, b = compiled(x)
    assert kiln.equal(a, x + 1) and kiln.equal(b, (x + 1) * 0.5)


def test_erase_dead_nodes_and_values():
    traced = kiln.jit.trace(lambda x: x * 3, kiln.randn(2), optimize=False)
    g = traced.graph.clone()
    cast, mul = g.nodes  # the number 3 is cast to f32 first
    neg = g.insert("neg", [g.inputs[0]])
    g.erase(neg)
    with pytest.raises(RuntimeError, match="erased"):
        _ = neg.op
    g.set_outputs([g.inputs[0]])
    g.erase(mul)
    g.erase(cast)
    for c in g.constants:
        g.remove_unused(c)
    g.verify()
    assert g.nodes == [] and g.constants == []


def test_rewrites_are_checked():
    traced = kiln.jit.trace(mlp(), kiln.randn(1, 8))
    with pytest.raises(RuntimeError, match="cannot change.*clone"):
        traced.graph.erase(traced.graph.nodes[0])
    g = traced.graph.clone()
    other = traced.graph.clone()
    with pytest.raises(ValueError, match="another graph"):
        g.insert("relu", [other.inputs[0]])
    with pytest.raises(RuntimeError, match="matmul"):
        g.insert("matmul", [g.inputs[0], g.inputs[0]])  # [1, 8] @ [1, 8]
    with pytest.raises(RuntimeError, match="still has uses"):
        g.erase(g.nodes[0])
    with pytest.raises(RuntimeError, match=r"is float32\[1, 16\] but"):
        g.nodes[0].output.replace_all_uses_with(g.inputs[0])
    # A rewrite that leaves wrong types is caught by the verifier, not run.
    last = g.nodes[1]  # linear(16 -> 4), after the fused linear + relu
    last.set_input(0, g.inputs[0])  # f32[1, 8] where the weight wants 16 features
    with pytest.raises(Exception, match=r"verify: node 1 \(linear\).*1x8 and 16x4"):
        g.verify()
    with pytest.raises(Exception, match="1x8 and 16x4"):
        traced.with_graph(g)


def test_parse_graph_text_and_run_it():
    g = kiln.jit.parse_graph("""graph(%x : f32[3]) {
  %c0 : f32[] = const 2
  %0 : f32[3] = mul(%x, %c0)
  %1 : f32[3] = relu(%0)
  return (%1)
}""")
    x = kiln.tensor([-1.0, 0.5, 2.0])
    assert kiln.jit.from_graph(g)(x).tolist() == [0.0, 1.0, 4.0]


def test_symbolic_dims_read_as_their_text():
    g = kiln.jit.parse_graph("""graph(%x : f32[batch, 4]) {
  %0 : f32[2*batch, 4] = cat(%x, %x) {dim=0}
  %1 : f32[batch, 2, 4] = reshape(%0) {shape=[batch, 2, 4]}
  return (%1)
}""")
    cat, reshape = g.nodes
    assert g.inputs[0].shape == ("batch", 4)
    assert cat.output.shape == ("2*batch", 4)
    assert reshape.output.shape == ("batch", 2, 4)
    assert reshape.attrs == {"shape": ["batch", 2, 4]}


def test_a_compiled_model_from_eight_threads():
    net = mlp()
    traced = kiln.jit.trace(net, kiln.randn(3, 8))
    inputs = [kiln.randn(3, 8) for _ in range(8)]
    with kiln.no_grad():
        expected = [net(x) for x in inputs]
    failures = []

    def work(i):
        for _ in range(1000):
            if not kiln.equal(traced(inputs[i]), expected[i]):
                failures.append(i)
                return

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_compiled_memory_returns_to_the_allocator():
    gc.collect()
    before = kiln._C._allocator_live_bytes()
    net = mlp().hybridize()
    x = kiln.randn(4, 8)
    for _ in range(3):
        net(x)
    traced = kiln.jit.trace(net, x)
    traced(x)
    del net, traced, x
    gc.collect()
    assert kiln._C._allocator_live_bytes() == before


def test_a_stale_node_handle_never_stands_for_a_new_node():
    traced = kiln.jit.trace(lambda x: x * 3, kiln.randn(2), optimize=False)
    g = traced.graph.clone()
    neg = g.insert("neg", [g.inputs[0]])
    g.erase(neg)
    new = g.insert("sigmoid", [g.inputs[0]])  # may reuse the erased node's memory
    assert neg != new
    with pytest.raises(RuntimeError, match="erased"):
        neg.set_input(0, g.inputs[0])
    assert new.op == "sigmoid"


def test_compiling_a_capture_twice_leaves_the_first_graph_alone():
    x = kiln.randn(3)
    recorder = kiln._C.jit.Recorder()
    recorder.begin([x], [])
    y = (x * 1) + 0
    capture = recorder.end([y])
    as_recorded = kiln._C.jit.CompiledFunction(capture, optimize=False)
    text = str(as_recorded.graph)
    optimized = kiln._C.jit.CompiledFunction(capture)  # the passes remove the mul and add
    assert str(as_recorded.graph) == text and "mul(" in text
    assert "mul(" not in str(optimized.graph)
    x2 = kiln.randn(3)
    with kiln.enable_grad():
        assert kiln.equal(as_recorded.run([x2.requires_grad_()])[0], x2 * 1 + 0)


def test_from_graph_returns_the_first_outputs():
    g = kiln.jit.parse_graph("""graph(%x : f32[2]) {
  %0 : f32[2] = neg(%x)
  %1 : f32[2] = exp(%x)
  return (%0, %1)
}""")
    x = kiln.randn(2)
    (only,) = kiln._C.jit.CompiledFunction.from_graph(g, 1).run([x])
    assert kiln.equal(only, -x)
