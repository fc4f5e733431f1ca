"""What DistributedDataParallel stands on, in one process: post-accumulate
gradient hooks and end-of-backward callbacks (against torch's), the bucket
assignment (against torch.distributed's), and DDP without a process group."""
import numpy as np
import pytest
import torch
import torch.distributed as tdist

import kiln
from kiln import nn
from kiln.nn.parallel._reducer import assign_buckets


def record_post_accumulate(w, log):
    return w.register_post_accumulate_grad_hook(lambda p: log.append(p.grad.tolist()))


@pytest.mark.parametrize("preset_grad", [False, True])
def test_post_accumulate_hook_sees_the_accumulated_grad_once_as_torch(preset_grad):
    values = [1.0, -2.0, 3.0]
    logs = []
    for lib in (kiln, torch):
        w = lib.tensor(values, requires_grad=True)
        if preset_grad:
            w.grad = lib.ones(3)
        log = []
        record_post_accumulate(w, log)
        # Three uses: the engine sums them before accumulating, so one call.
        ((w * 2).sum() + (w * w).sum() + w.sum()).backward()
        logs.append(log)
    assert logs[0] == logs[1]
    assert len(logs[0]) == 1


def test_post_accumulate_hook_order_and_removal():
    w = kiln.tensor([1.0, 2.0], requires_grad=True)
    calls = []
    first = w.register_post_accumulate_grad_hook(lambda p: calls.append("first"))
    w.register_post_accumulate_grad_hook(lambda p: calls.append("second"))
    (w * 3).sum().backward()
    first.remove()
    (w * 3).sum().backward()
    assert calls == ["first", "second", "second"]


def test_post_accumulate_hook_may_modify_grad_in_place():
    w = kiln.tensor([1.0, 2.0], requires_grad=True)
    w.register_post_accumulate_grad_hook(lambda p: p.grad.mul_(10))
    (w * 3).sum().backward()
    assert w.grad.tolist() == [30.0, 30.0]


def test_post_accumulate_hook_refuses_non_leaves_and_grad_does_not_call_it():
    w = kiln.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="non-leaf"):
        (w * 2).register_post_accumulate_grad_hook(lambda p: None)
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        kiln.ones(2).register_post_accumulate_grad_hook(lambda p: None)
    calls = []
    w.register_post_accumulate_grad_hook(lambda p: calls.append(1))
    kiln.autograd.grad((w * w).sum(), w)
    assert calls == [] and w.grad is None


def test_queue_callback_runs_after_every_node_before_backward_returns():
    x = kiln.tensor([1.0, 2.0], requires_grad=True)
    w = kiln.tensor([3.0, 4.0], requires_grad=True)
    events = []
    w.register_post_accumulate_grad_hook(lambda p: events.append("w"))
    x.register_post_accumulate_grad_hook(lambda p: events.append("x"))

    def on_y(grad):
        events.append("y")
        kiln.autograd.queue_callback(lambda: events.append(("end", x.grad.tolist())))
        kiln.autograd.queue_callback(lambda: kiln.autograd.queue_callback(
            lambda: events.append("queued by a callback")))

    y = x * w
    y.register_hook(on_y)
    y.sum().backward()
    assert events[0] == "y" and sorted(events[1:3]) == ["w", "x"]
    assert events[3:] == [("end", [3.0, 4.0]), "queued by a callback"]


def test_queue_callback_outside_backward_raises():
    with pytest.raises(RuntimeError, match="only be called while backward is running"):
        kiln.autograd.queue_callback(lambda: None)


def test_an_error_in_a_callback_reaches_backwards_caller():
    x = kiln.tensor([1.0], requires_grad=True)
    failing = [True]
    ran = []

    def callback():
        ran.append(1)
        if failing.pop():
            raise ValueError("from the callback")
    x.register_post_accumulate_grad_hook(lambda p: kiln.autograd.queue_callback(callback))
    with pytest.raises(ValueError, match="from the callback"):
        (x * 2).sum().backward()
    failing.append(False)
    (x * 2).sum().backward()  # the engine is usable again
    assert ran == [1, 1]


def test_a_hybridized_models_backward_calls_the_hooks_with_eagers_grads():
    grads = {}
    for hybrid in (False, True):
        kiln.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        if hybrid:
            model.hybridize()
        seen = []
        for name, p in model.named_parameters():
            p.register_post_accumulate_grad_hook(
                lambda q, name=name, seen=seen: seen.append((name, q.grad.numpy().copy())))
        x = kiln.ones(3, 4)
        for _ in range(2):  # the second call runs the compiled entry
            model.zero_grad()
            seen.clear()
            model(x).sum().backward()
        grads[hybrid] = dict(seen)
        assert len(seen) == 4
    for name, g in grads[False].items():
        np.testing.assert_array_equal(grads[True][name], g)


@pytest.mark.parametrize("cap_mb", [1, 2, 25])
def test_bucket_assignment_equals_torchs_over_the_reversed_parameters(cap_mb):
    sizes = [100, 300000, 5, 262144, 1000, 70000, 400000, 3]
    ours = assign_buckets([kiln.zeros(n) for n in sizes], cap_mb * 1024 * 1024)
    backward_order = [torch.zeros(n) for n in reversed(sizes)]
    theirs, _ = tdist._compute_bucket_assignment_by_size(
        backward_order, [1024 * 1024, cap_mb * 1024 * 1024])
    last = len(sizes) - 1
    assert ours == [[last - i for i in bucket] for bucket in theirs]


def test_buckets_hold_one_dtype_each():
    params = [kiln.zeros(10), kiln.zeros(10, dtype=kiln.float64), kiln.zeros(10)]
    assert assign_buckets(params, 1024) == [[2, 0], [1]]


def test_ddp_without_a_process_group_says_what_to_do():
    if kiln.distributed.is_initialized():
        pytest.skip("a process group is initialized in this process")
    with pytest.raises(RuntimeError, match=r"init_process_group\(\"mpi\"\) first"):
        nn.parallel.DistributedDataParallel(nn.Linear(2, 2))
