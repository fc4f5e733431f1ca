"""Training through compiled graphs (issue 10): a hybridized or traced model
called with grad runs a compiled forward, and loss.backward() runs its
compiled backward graph; kiln.compile of a whole training step (forward,
loss, backward, optimizer update) runs as one graph with the weights and
the optimizer's state updated in place. Everything is checked against the
same steps in eager kiln, bit for bit where the passes keep rounding."""
import numpy as np
import pytest

import kiln
from kiln import nn, optim
from workloads import lenet, w1


def my_model():
    return nn.Sequential(nn.Linear(10, 5), nn.ReLU(), nn.Linear(5, 2))


def numpy_params(model):
    return [p.detach().numpy().copy() for p in model.parameters()]


def numpy_grads(model):
    return [None if p.grad is None else p.grad.numpy().copy() for p in model.parameters()]


def assert_same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if w is None:
            assert g is None
            continue
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("builder,shape,classes", [(my_model, (10, 10), 2), (w1, (64, 512), 2),
                                                   (lenet, (4, 1, 28, 28), 10)],
                         ids=["MyModel", "W1", "W2"])
@pytest.mark.parametrize("how", ["trace", "hybridize"])
def test_gradients_through_the_compiled_backward_equal_eager(builder, shape, classes, how):
    kiln.manual_seed(0)
    model = builder()
    x = kiln.randn(*shape, requires_grad=True)
    target = kiln.randint(0, classes, (shape[0],))
    criterion = nn.CrossEntropyLoss()

    criterion(model(x), target).backward()
    eager_grads, eager_x_grad = numpy_grads(model), x.grad.numpy().copy()
    model.zero_grad()
    x.grad = None

    compiled = kiln.jit.trace(model, x) if how == "trace" else model.hybridize() or model
    for _ in range(2):  # hybridize records on the first call (eagerly); then the plan runs
        model.zero_grad()
        x.grad = None
        y = compiled(x)
        criterion(y, target).backward()
    assert y._grad_fn_name == "CompiledFunctionBackward"
    assert_same(numpy_grads(model), eager_grads)
    np.testing.assert_array_equal(x.grad.numpy(), eager_x_grad)


def test_the_backward_reads_only_saved_activations():
    model = my_model()
    x = kiln.randn(10, 10)
    traced = kiln.jit.trace(model, x)
    forward, backward = traced.grad_graphs(x)
    # The forward returns the output and the one hidden activation the
    # backward needs (relu's output, read by its grad and by fc2's weight grad).
    assert len(forward.outputs) == 2
    text = str(backward)
    assert "%saved0 : f32[10, 5]" in text and "%grad_out0 : f32[10, 2]" in text
    assert "linear" not in text  # no forward op is recomputed
    assert len(backward.outputs) == 4  # fc1.weight, fc1.bias, fc2.weight, fc2.bias
    with kiln.no_grad():
        assert traced(x).requires_grad is False


def test_backward_errors_match_eager():
    model = my_model()
    x = kiln.randn(10, 10)
    traced = kiln.jit.trace(model, x)
    loss = traced(x).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()

    loss = traced(x).sum()
    loss.backward(retain_graph=True)
    loss.backward()  # retained: a second backward accumulates
    assert model[0].weight.grad is not None

    x = kiln.randn(10, 10, requires_grad=True)
    y = traced(x)
    with kiln.no_grad():
        x.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()

    y = traced(kiln.randn(10, 10))
    with pytest.raises(RuntimeError, match="cannot be differentiated again"):
        kiln.autograd.grad([y.sum()], [model[0].weight], create_graph=True)


def test_dropout_and_batch_norm_keep_training_semantics_when_compiled():
    def build():
        kiln.manual_seed(3)
        return nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.5),
                             nn.Linear(16, 3))

    x = kiln.randn(6, 8)
    target = kiln.randint(0, 3, (6,))
    runs = []
    for compiled in (False, True):
        model = build()
        model.train()
        if compiled:
            model.hybridize()
        kiln.manual_seed(11)
        outputs, grads = [], []
        for _ in range(3):
            model.zero_grad()
            y = model(x)
            nn.CrossEntropyLoss()(y, target).backward()
            outputs.append(y.detach().numpy().copy())
            grads.append(numpy_grads(model))
        runs.append((outputs, grads, model[1].running_mean.numpy().copy(),
                     int(model[1].num_batches_tracked.item())))
    (eager_out, eager_grads, eager_mean, eager_count), (out, grads, mean, count) = runs
    for got, want in zip(out, eager_out):
        np.testing.assert_array_equal(got, want)  # same dropout masks, call after call
    assert not np.array_equal(out[0], out[1])  # the generator advanced between calls
    for got, want in zip(grads, eager_grads):
        assert_same(got, want)
    np.testing.assert_array_equal(mean, eager_mean)  # running statistics updated per call
    assert count == eager_count == 3


def train(make_optimizer, compiled, steps=6, lr_change=None):
    kiln.manual_seed(0)
    model = my_model()
    opt = make_optimizer(model.parameters())
    criterion = nn.CrossEntropyLoss()

    def step(x, target):
        opt.zero_grad()
        loss = criterion(model(x), target)
        loss.backward()
        opt.step()
        return loss

    if compiled:
        step = kiln.compile(step)
    kiln.manual_seed(1)
    losses = []
    for i in range(steps):
        if i == lr_change:
            opt.param_groups[0]["lr"] = 0.5
        losses.append(step(kiln.randn(10, 10), kiln.randint(0, 2, (10,))).item())
    return model, opt, losses, step


@pytest.mark.parametrize("make_optimizer", [
    lambda p: optim.SGD(p, lr=0.1),
    lambda p: optim.SGD(p, lr=0.1, momentum=0.9),
    lambda p: optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    lambda p: optim.Adam(p, lr=0.01),
    lambda p: optim.AdamW(p, lr=0.01, weight_decay=0.1),
], ids=["sgd", "sgd-momentum", "sgd-nesterov", "adam", "adamw"])
def test_a_compiled_training_step_equals_eager_steps(make_optimizer):
    eager_model, eager_opt, eager_losses, _ = train(make_optimizer, compiled=False, lr_change=3)
    model, opt, losses, step = train(make_optimizer, compiled=True, lr_change=3)
    assert len(step.cache_info().entries) == 1 and step.cache_info().hits == 5
    # The same bits, the learning rate a tensor in the plan and a number
    # eagerly: both scale and add with one rounding (Note [Add with alpha]).
    assert losses == eager_losses
    assert_same(numpy_params(model), numpy_params(eager_model))
    assert_same(numpy_grads(model), numpy_grads(eager_model))  # .grad is this step's gradient
    got = opt.state[next(iter(model.parameters()))]
    want = eager_opt.state[next(iter(eager_model.parameters()))]
    assert got.keys() == want.keys()
    if "step" in want:
        assert float(got["step"]) == float(want["step"]) == 6
    for name, buffer in want.items():
        if isinstance(buffer, kiln.Tensor):
            np.testing.assert_allclose(got[name].numpy(), buffer.numpy(), rtol=1e-6, atol=1e-7)


def test_sgd_and_adam_steps_are_bitwise_eager_at_a_fixed_lr():
    for make in (lambda p: optim.SGD(p, lr=0.1, momentum=0.9), lambda p: optim.Adam(p, lr=0.01)):
        eager_model, _, eager_losses, _ = train(make, compiled=False)
        model, _, losses, _ = train(make, compiled=True)
        assert losses == eager_losses
        assert_same(numpy_params(model), numpy_params(eager_model))


def test_a_compiled_step_holds_no_copies_of_the_weights():
    model, opt, _, step = train(lambda p: optim.SGD(p, lr=0.1), compiled=True, steps=2)
    with kiln.no_grad():
        model[0].weight.fill_(0.0)  # the next call reads the weight as it is now
    step(kiln.randn(10, 10), kiln.randint(0, 2, (10,)))
    assert np.abs(model[0].weight.detach().numpy()).max() < 1.0


def test_a_training_step_cannot_be_saved_but_its_model_can(tmp_path):
    model, _, _, _ = train(lambda p: optim.SGD(p, lr=0.1), compiled=True, steps=2)
    x = kiln.randn(3, 10)
    kiln.jit.trace(model, x).save(tmp_path / "trained.kiln")
    loaded = kiln.jit.load(tmp_path / "trained.kiln")
    with kiln.no_grad():
        np.testing.assert_array_equal(loaded(x).numpy(), model(x).numpy())


def test_sgd_dampening_before_the_first_step_is_refused_when_compiling():
    with pytest.raises(ValueError, match="take one eager step first"):
        train(lambda p: optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.5), compiled=True)


def training_step(model, opt):
    def step(x, target):
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(x), target)
        loss.backward()
        opt.step()
        return loss
    return step


def test_a_scheduler_changes_the_learning_rate_a_compiled_step_uses():
    runs = []
    for compiled in (False, True):
        kiln.manual_seed(0)
        model = my_model()
        opt = optim.SGD(model.parameters(), lr=0.5)
        sched = optim.lr_scheduler.StepLR(opt, 1, gamma=0.1)
        step = training_step(model, opt)
        step = kiln.compile(step) if compiled else step
        kiln.manual_seed(1)
        for _ in range(4):
            step(kiln.randn(10, 10), kiln.randint(0, 2, (10,)))
            sched.step()
        runs.append(numpy_params(model))
    for got, want in zip(*runs):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
