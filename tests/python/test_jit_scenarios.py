"""SCENARIOS.md §2, §3 (without save/load), §4 and §5 as written there, and
the hybridized training of §6: the same code eager and compiled, compared."""
import re
import time

import pytest

import kiln
from kiln import nn
from workloads import lenet, w1


def test_scenario_2_hybridize(capsys):
    x = kiln.randn(1, 512)
    net = w1()
    y = net(x)

    net.hybridize()           # nothing happens yet
    y2 = net(x)               # first call: records the graph, optimizes, compiles
    y3 = net(x)               # later calls: one call into C++, no Python per layer
    assert kiln.allclose(y, y3)
    assert kiln.equal(y2, y3)  # the same kernels: bit for bit

    class HybridNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden = nn.Linear(4, 10)
            self.output = nn.Linear(10, 2)
        def forward(self, x):  # noqa: E301
            print("tracing forward")                  # runs while recording only
            return self.output(kiln.relu(self.hidden(x)))

    h = HybridNet(); h.hybridize()  # noqa: E702
    h(kiln.randn(1, 4))       # prints "tracing forward"
    assert capsys.readouterr().out == "tracing forward\n"
    h(kiln.randn(1, 4))       # prints nothing: the compiled graph ran
    assert capsys.readouterr().out == ""
    h(kiln.randn(3, 4))       # new input shape: records again, and can say why
    assert capsys.readouterr().out == "tracing forward\n"

    info = h.cache_info()  # the batch changed: one entry, with the batch a symbol
    assert info.hits == 1 and len(info.entries) == 1 and "float32[s0, 4]" in info.entries[0]
    assert info.misses == ["first call", "input 0 dim 0: 1 -> 3"]
    assert "input 0 dim 0: 1 -> 3" in str(info)


def test_hybridize_follows_grad_mode_and_train_eval():
    net = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5)).hybridize()
    x = kiln.randn(2, 3)
    net(x)
    with kiln.no_grad():
        net(x)
    net.eval()
    y = net(x)
    assert kiln.equal(y, net[0](x))  # eval: dropout is the identity
    assert net.cache_info().misses == ["first call", "grad mode: on -> off",
                                       "grad mode: off -> on; training: true -> false"]


def test_hybridize_off_runs_forward_again(capsys):
    class Loud(nn.Module):
        def forward(self, x):
            print("forward")
            return x * 2

    m = Loud().hybridize()
    m(kiln.ones(2)); m(kiln.ones(2))  # noqa: E702
    assert capsys.readouterr().out == "forward\n"
    m.hybridize(active=False)
    m(kiln.ones(2))
    assert capsys.readouterr().out == "forward\n"
    with pytest.raises(RuntimeError, match="not hybridized"):
        m.cache_info()


def test_scenario_3_trace_and_look():
    x = kiln.randn(1, 512)
    net = w1()
    traced = kiln.jit.trace(net, x)
    text = str(traced.graph)  # the optimized IR, as text
    assert text.startswith("graph(%input : f32[1, 512]) {")
    assert "%0.weight : f32[256, 512] = param" in text
    # linear -> relu, fused twice, then the last linear
    assert text.count('= linear_act(') == 2 and text.count('{activation="relu"}') == 2
    assert text.count("= linear(") == 1 and "relu(" not in text.replace('"relu"', "")
    assert kiln.equal(traced(x), net(x))
    # Parameters stay bound to the module: training it changes the traced result.
    with kiln.no_grad():
        net[4].bias.add_(1.0)
    assert kiln.equal(traced(x), net(x))
    assert "constant_fold" in str(traced.report())


def test_trace_checks_signature_and_arguments():
    traced = kiln.jit.trace(w1(), kiln.randn(1, 512))
    with pytest.raises(ValueError, match=r"\[1, 512\]"):
        traced(kiln.randn(2, 512))
    with pytest.raises(TypeError, match="inputs must be tensors .* it holds a int"):
        kiln.jit.trace(lambda a: a, (3,))
    # A Python number is a constant of the graph (as torch.compile treats
    # it): each value gets a graph of its own.
    f = kiln.compile(lambda a, b: a * b)
    assert f(kiln.ones(2), 2.0).tolist() == [2.0, 2.0]
    assert f(kiln.ones(2), 3.0).tolist() == [3.0, 3.0]


def test_scenario_4_compile_a_function():
    @kiln.compile
    def opt_foo(x, y):
        return kiln.sin(x) + kiln.cos(y)

    a, b = kiln.randn(10, 10), kiln.randn(10, 10)
    assert kiln.equal(opt_foo(a, b), kiln.sin(a) + kiln.cos(b))   # the recording call
    assert kiln.equal(opt_foo(a, b), kiln.sin(a) + kiln.cos(b))   # the compiled graph
    assert opt_foo.__name__ == "opt_foo"
    assert opt_foo.cache_info().hits == 1


def test_scenario_4_constants_fold_to_ten():
    def add(a, b):
        return a + b

    def fancy_func(a, b, c, d):
        e = add(a, b)
        f = add(c, d)
        return add(e, f)

    traced = kiln.jit.trace(lambda: fancy_func(*(kiln.tensor(float(v)) for v in (1, 2, 3, 4))), ())
    assert "add" not in str(traced.graph)
    assert re.search(r"%c0 : f32\[\] = const 10\n  return \(%c0\)", str(traced.graph))
    assert traced().item() == 10
    unoptimized = kiln.jit.trace(lambda: fancy_func(*(kiln.tensor(float(v)) for v in (1, 2, 3, 4))),
                                 (), optimize=False)
    assert str(unoptimized.graph).count("= add(") == 3


def test_compile_returns_structures_and_a_module():
    @kiln.compile
    def parts(x):
        return {"double": x * 2, "pair": (x + 1, [x - 1])}

    x = kiln.arange(3.0)
    for _ in range(2):
        out = parts(x)
        assert kiln.equal(out["double"], x * 2)
        assert kiln.equal(out["pair"][0], x + 1) and kiln.equal(out["pair"][1][0], x - 1)
    net = w1()
    assert kiln.compile(net) is net and net._hybrid is not None


def test_scenario_5_benchmark_eager_against_compiled():
    def bench(f, x, n=20):
        t = time.perf_counter()
        for _ in range(n):
            f(x)
        return time.perf_counter() - t

    for get_net, x in ((w1, kiln.randn(1, 512)), (lenet, kiln.rand(1, 1, 28, 28))):
        kiln.manual_seed(0)
        eager = get_net()
        assert bench(eager, x) > 0
        kiln.manual_seed(0)
        net = get_net(); net.hybridize()  # noqa: E702
        assert bench(net, x) > 0
        with kiln.no_grad():
            assert kiln.equal(net(x), eager(x))
        assert net.cache_info().hits >= 19


def test_scenario_6_train_hybridized_matches_eager():
    from kiln import optim

    class MyModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(10, 5)
            self.fc2 = nn.Linear(5, 2)
        def forward(self, x):  # noqa: E301
            return self.fc2(nn.functional.relu(self.fc1(x)))

    kiln.manual_seed(0)
    data = kiln.randn(100, 10)
    target = kiln.randint(0, 2, (100,))
    models = []
    for hybrid in (False, True):
        kiln.manual_seed(1)
        model = MyModel()
        if hybrid:
            model.hybridize()
        opt = optim.SGD(model.parameters(), lr=0.1)
        criterion = nn.CrossEntropyLoss()
        losses = []
        for _epoch in range(5):
            for i in range(0, 100, 10):
                loss = criterion(model(data[i:i + 10]), target[i:i + 10])
                opt.zero_grad()
                loss.backward()
                opt.step()
            losses.append(loss.item())
        models.append((model, losses))
    (eager, eager_losses), (hybrid, hybrid_losses) = models
    assert eager_losses == hybrid_losses
    for (name, a), (_, b) in zip(eager.named_parameters(), hybrid.named_parameters()):
        assert kiln.equal(a, b), name
    assert hybrid.cache_info().hits == 49


def test_hybridized_child_inside_a_trace_is_recorded_inline():
    inner = nn.Sequential(nn.Linear(4, 4), nn.ReLU()).hybridize()

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner
            self.head = nn.Linear(4, 1)
        def forward(self, x):  # noqa: E301
            return self.head(self.inner(x))

    outer = Outer()
    x = kiln.randn(2, 4)
    inner(x)  # the child has a compiled entry of its own already
    traced = kiln.jit.trace(outer, x)
    assert [n.op for n in traced.graph.nodes] == ["linear_act", "linear"]
    assert traced.graph.find_param("inner.0.weight") is not None
    assert kiln.equal(traced(x), outer(x))


def test_strict_hybridize_raises_at_the_users_line():
    class Branchy(nn.Module):
        def forward(self, x):
            if x.sum() > 0:  # the line the error names
                return x
            return -x

    m = Branchy().hybridize(strict=True)
    with pytest.raises(kiln.jit.TraceError, match=r"bool\(\).*test_jit_scenarios.py:\d+"):
        m(kiln.ones(3))
    assert len(m.cache_info().entries) == 0  # nothing half-compiled was kept


def test_strict_compile_names_the_users_line_and_stays_usable():
    @kiln.compile(strict=True)
    def f(x):
        return x * float(x.sum())  # frozen: the line the error names

    with pytest.raises(kiln.jit.TraceError, match=r"test_jit_scenarios.py:\d+"):
        f(kiln.ones(3))
    assert len(f.cache_info().entries) == 0
    with pytest.raises(kiln.jit.TraceError):  # the same on the next call: nothing was kept
        f(kiln.ones(3))


def test_a_hybridized_module_is_garbage_collected():
    # The cache (C++) holds the module's bound forward, which holds the
    # module: the collector must see that cycle through the C++ object.
    import gc
    import weakref

    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU()).hybridize()
    net(kiln.randn(2, 4))
    alive = weakref.ref(net)
    del net
    gc.collect()
    assert alive() is None


def test_compile_report_says_what_the_compiler_did():
    traced = kiln.jit.trace(w1(), kiln.randn(1, 512))
    report = traced.report()
    assert [p["name"] for p in report.passes] == ["constant_fold", "peephole", "cse",
                                                    "simplify_control_flow", "dce",
                                                  "fuse_activations", "fuse_linear_gelu",
                                                  "fuse_elementwise"]
    assert (report.nodes_before, report.nodes_after) == (5, 3)
    assert report.count("fuse linear + relu") == 2
    # The two hidden layers' outputs are live together (the second reads the first).
    assert (report.planned_bytes, report.unshared_bytes, report.steps) == (1536, 1536, 3)
    assert report.total_seconds >= report.record_seconds > 0
    assert "1536 bytes planned" in str(report) and "compile time: record" in str(report)

    folded = kiln.jit.trace(lambda x: x * 1 + 0, kiln.randn(3))
    assert folded.report().count("mul-one") == 1
    assert folded.report().nodes_after < folded.report().nodes_before


def test_compiled_weights_packed_once_follow_updates():
    # At batch 64 a compiled linear keeps its weight packed across calls and
    # packs it again when the weight's version counter moves: every kiln
    # in-place op moves it; a write through a NumPy view of the same memory
    # does not, until kiln.autograd.increment_version says so.
    kiln.manual_seed(0)
    net = w1()
    net.eval()
    x = kiln.randn(64, 512)
    with kiln.no_grad():
        traced = kiln.jit.trace(net, x)
        assert kiln.equal(traced(x), net(x))
        weight = net[0].weight
        weight.mul_(0.5)
        assert kiln.equal(traced(x), net(x)), "an in-place op is seen"
        weight.detach().numpy()[:] *= 2
        assert not kiln.equal(traced(x), net(x)), "a NumPy write alone is not"
        kiln.autograd.increment_version(weight)
        assert kiln.equal(traced(x), net(x)), "increment_version makes it seen"


def test_hybridized_child_with_a_number_argument_inside_a_trace_runs_eagerly():
    class Scale(nn.Module):
        def forward(self, x, factor):
            return x * factor

    inner = Scale().hybridize()

    def outer(x):
        return inner(x, 3.0) + 1  # a float: fine eagerly, and so inside a trace

    x = kiln.randn(2, 3)
    traced = kiln.jit.trace(outer, x)
    assert kiln.equal(traced(x), x * 3.0 + 1)
    assert len(inner.cache_info().entries) == 0
