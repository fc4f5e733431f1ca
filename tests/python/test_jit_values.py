"""Python values compiled code reads (issue 21): a number or flag in a module
attribute, a compiled function's global or closure variable, an optimizer's
option is a constant of the recorded graph. None is silently frozen: a
change records the code again and cache_info() names the value, old and
new; values the code assigns while recording are reported."""
import warnings

import numpy as np
import pytest

import kiln
from kiln import nn, optim
from kiln.jit import _guards

X = kiln.ones(2, 3)


class Scaled(nn.Module):
    use_bias = True  # a class default an instance may override

    def __init__(self):
        super().__init__()
        self.scale = 0.5
        self.note = "not read by forward"
        self.drop = nn.Dropout(0.0)

    def forward(self, x):
        y = self.drop(x) * self.scale
        return y + 1 if self.use_bias else y


def run(module, x=X):
    with kiln.no_grad():
        return module(x).numpy()


def test_a_module_attribute_change_records_again_and_says_which():
    m = Scaled().hybridize()
    np.testing.assert_array_equal(run(m), np.full((2, 3), 1.5))
    m.scale = 2.0
    np.testing.assert_array_equal(run(m), np.full((2, 3), 3.0))
    assert m.cache_info().misses == ["first call", "self.scale changed from 0.5 to 2.0"]
    assert len(m.cache_info().entries) == 1
    m.drop.p = 1.0  # a submodule's attribute, read by Dropout.forward
    np.testing.assert_array_equal(run(m), np.ones((2, 3)))
    assert m.cache_info().misses[-1] == "self.drop.p changed from 0.0 to 1.0"
    m.use_bias = False  # the instance now hides the class's value
    np.testing.assert_array_equal(run(m), np.zeros((2, 3)))
    assert m.cache_info().misses[-1] == "self.use_bias changed from True to False"


def test_an_attribute_the_code_does_not_read_costs_no_recording():
    m = Scaled().hybridize()
    run(m)
    for i in range(3):
        m.note = f"step {i}"
        m.epoch = i  # a new attribute
        run(m)
    info = m.cache_info()
    assert info.misses == ["first call"] and info.hits == 3
    assert m.note == "step 2" and m.scale == 0.5  # the attributes are all back in place


def test_an_equal_value_or_int_for_float_is_told_apart():
    m = Scaled().hybridize()
    run(m)
    m.scale = 0.5  # the same value: nothing to do
    run(m)
    assert m.cache_info().misses == ["first call"]
    m.scale = 1  # an int: x * 1 is another graph than x * 1.0 for int inputs
    run(m)
    assert m.cache_info().misses[-1] == "self.scale changed from 0.5 to 1"


def test_replacing_a_submodule_or_a_parameter_records_again():
    m = nn.Sequential(nn.Linear(3, 3), nn.ReLU()).hybridize()
    x = kiln.randn(4, 3)
    run(m, x)
    setattr(m, "1", nn.Tanh())  # no parameters: the graph would run ReLU still
    np.testing.assert_allclose(run(m, x), m[1](m[0](x)).detach().numpy(), rtol=1e-6)
    assert m.cache_info().misses[-1] == "self.1 was replaced (a ReLU -> a Tanh)"
    m[0].weight = nn.Parameter(kiln.zeros(3, 3))  # not the tensor the graph binds
    np.testing.assert_allclose(run(m, x), np.tanh(m[0].bias.detach().numpy()) * np.ones((4, 1)),
                               rtol=1e-6)
    assert m.cache_info().misses[-1].startswith("self.0.weight was replaced")


class Counting(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1  # HERE: Python state the graph cannot update
        return x * self.calls


def test_a_value_forward_assigns_is_reported_and_does_not_record_forever():
    m = Counting().hybridize()
    with pytest.warns(kiln.jit.TracerWarning, match=r"self.calls = 1 assigned while tracing"):
        run(m)
    for _ in range(3):
        np.testing.assert_array_equal(run(m), np.ones((2, 3)))  # the graph holds calls == 1
    assert m.cache_info().misses == ["first call"] and m.calls == 1
    m.calls = 10  # assigned from outside: recorded again, with the new value
    with pytest.warns(kiln.jit.TracerWarning):
        np.testing.assert_array_equal(run(m), np.full((2, 3), 11.0))
    assert m.cache_info().misses[-1] == "self.calls changed from 1 to 10"
    with pytest.raises(kiln.jit.TraceError, match="self.calls = 1 assigned while tracing"):
        run(Counting().hybridize(strict=True))


def test_a_value_that_keeps_changing_warns_once():
    m = Scaled().hybridize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(_guards.WARN_AFTER + 2):
            m.scale = float(i)
            run(m)
    texts = [str(w.message) for w in caught if "changed" in str(w.message)]
    assert len(texts) == 1 and "self.scale changed 8 times" in texts[0], texts
    assert __file__ in texts[0]


SCALE = 2.0


def test_a_compiled_function_guards_its_globals_and_closure_variables():
    global SCALE
    offset = 1.0

    @kiln.compile
    def f(x):
        return x * SCALE + offset

    np.testing.assert_array_equal(f(X).numpy(), np.full((2, 3), 3.0))
    SCALE = 3.0
    np.testing.assert_array_equal(f(X).numpy(), np.full((2, 3), 4.0))
    offset = 0.0
    np.testing.assert_array_equal(f(X).numpy(), np.full((2, 3), 3.0))
    assert f.cache_info().misses == ["first call", "global SCALE changed from 2.0 to 3.0",
                                     "closure variable offset changed from 1.0 to 0.0"]
    SCALE = 2.0


def test_a_compiled_function_guards_the_modules_it_names():
    model = Scaled()

    @kiln.compile
    def f(x):
        return model(x)

    with kiln.no_grad():
        f(X)
        model.scale = 4.0
        np.testing.assert_array_equal(f(X).numpy(), np.full((2, 3), 5.0))
    assert f.cache_info().misses[-1] == "model.scale changed from 0.5 to 4.0"


def train_with_a_schedule(compiled):
    kiln.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    sched = optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)

    def step(x, target):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), target)
        loss.backward()
        opt.step()
        return loss

    step = kiln.compile(step) if compiled else step
    kiln.manual_seed(1)
    losses = []
    for i in range(6):
        if i == 3:
            opt.param_groups[0]["momentum"] = 0.5
        losses.append(step(kiln.randn(10, 10), kiln.randint(0, 2, (10,))).item())
        sched.step()
    return losses, [p.detach().numpy().copy() for p in model.parameters()], step


def test_a_training_step_sees_the_scheduler_and_guards_other_options():
    """StepLR halves lr every step (a tensor the compiled step reads: no new
    recording); momentum changes once (a constant: recorded again)."""
    eager_losses, eager_params, _ = train_with_a_schedule(compiled=False)
    losses, params, step = train_with_a_schedule(compiled=True)
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-6, atol=1e-7)
    for got, want in zip(params, eager_params):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert step.cache_info().misses == [
        "first call", "opt.param_groups[0]['momentum'] changed from 0.9 to 0.5"]
