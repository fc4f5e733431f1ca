"""A leaf's first gradient is kept, not copied, when no other handle can
see it (Note [Keeping the first gradient] in src/kiln/autograd/op_node.cpp),
and copied whenever something else holds it."""
import numpy as np

import kiln


def copies_in_backward(run):
    """The clones AccumulateGrad made while `run` ran backward."""
    with kiln.profiler.profile() as prof:
        run()
    events = prof.events()
    accumulators = [e for e in events if e.name == "AccumulateGrad"]
    assert accumulators
    return sum(1 for e in events if e.name == "clone" and e.depth == 1)


def test_a_gradient_only_backward_holds_becomes_grad_itself():
    # Sync mode: in async mode a queued op's record holds its output too
    # until it is freed, so the gradient is copied there.
    with kiln.execution("sync"):
        x = kiln.randn(4, 3, requires_grad=True)
        w = kiln.randn(4, 3)
        assert copies_in_backward(lambda: (x * w).sum().backward()) == 0
        np.testing.assert_array_equal(x.grad.numpy(), w.numpy())
        given = kiln.ones(4, 3)  # the caller keeps it: copied
        y = kiln.randn(4, 3, requires_grad=True)
        assert copies_in_backward(lambda: y.backward(given)) == 1


def test_async_mode_gives_the_same_gradients():
    with kiln.execution("async"):
        a = kiln.randn(64, 32, requires_grad=True)
        b = kiln.randn(64, 32, requires_grad=True)
        c = kiln.randn(64, 32)
        ((a + b) * c).sum().backward()
        a.grad.add_(1.0)
        np.testing.assert_array_equal(b.grad.numpy(), c.numpy())


def test_a_gradient_the_caller_passed_is_copied():
    x = kiln.randn(3, requires_grad=True)
    given = kiln.ones(3)
    x.backward(given)
    given.add_(1.0)
    np.testing.assert_array_equal(x.grad.numpy(), np.ones(3, np.float32))
    y = kiln.randn(3, requires_grad=True)
    given = kiln.ones(3)
    y.clone().backward(given)  # clone's backward passes the tensor on as it is
    given.add_(1.0)
    np.testing.assert_array_equal(y.grad.numpy(), np.ones(3, np.float32))


def test_two_leaves_handed_one_tensor_get_their_own():
    a = kiln.randn(3, requires_grad=True)
    b = kiln.randn(3, requires_grad=True)
    c = kiln.randn(3)
    ((a + b) * c).sum().backward()  # add's backward hands one tensor to both
    a.grad.add_(1.0)
    np.testing.assert_array_equal(b.grad.numpy(), c.numpy())
    np.testing.assert_array_equal(a.grad.numpy(), c.numpy() + 1.0)


def test_a_gradient_a_hook_keeps_is_copied():
    x = kiln.randn(3, requires_grad=True)
    kept = []
    x.register_hook(lambda g: kept.append(g))
    (x * 2.0).sum().backward()
    x.grad.zero_()
    np.testing.assert_array_equal(kept[0].numpy(), np.full(3, 2.0, np.float32))


def test_a_gradient_a_hook_exported_is_copied():
    x = kiln.randn(3, requires_grad=True)
    exported = []
    x.register_hook(lambda g: exported.append(g.numpy()))  # shares the memory
    (x * 2.0).sum().backward()
    x.grad.zero_()
    np.testing.assert_array_equal(exported[0], np.full(3, 2.0, np.float32))


def test_memory_kiln_does_not_own_is_copied():
    cached = np.full(3, 4.0, np.float32)

    class Scale(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 4.0

        @staticmethod
        def backward(ctx, grad):
            return kiln.from_numpy(cached)  # a buffer the Function keeps

    x = kiln.randn(3, requires_grad=True)
    Scale.apply(x).sum().backward()
    x.grad.zero_()
    np.testing.assert_array_equal(cached, np.full(3, 4.0, np.float32))


def test_later_gradients_still_add_up():
    x = kiln.randn(3, requires_grad=True)
    (x * 2.0).sum().backward()
    kept_grad = x.grad
    (x * 3.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 5.0, np.float32))
    np.testing.assert_array_equal(kept_grad.numpy(), np.full(3, 2.0, np.float32))
