"""Eager autograd (fnx.autograd in docs/api.md): backward, autograd.grad, grad modes, hooks, Functions, errors."""
import math

import numpy as np
import pytest

import fnx
import fnx.nn.functional as F
from fnx.autograd import Function


def leaf(values, dtype=fnx.float64):
    return fnx.tensor(values, dtype=dtype, requires_grad=True)


# ---------------------------------------------------------------- backward
def test_gradients_accumulate_over_backward_calls():
    x = leaf([1.0, 2.0, 3.0])
    (x * x).sum().backward()
    (x * x).sum().backward()
    assert x.grad.tolist() == [4.0, 8.0, 12.0]
    assert not x.grad.requires_grad


def test_dot_grad_never_shares_memory_with_what_the_user_holds():
    """A leaf's first gradient is taken without a copy only when nothing else refers to it (PyTorch's AccumulateGrad
    steal): not the user's `gradient=`, not a gradient that a hook kept or another leaf also got."""
    x = leaf([1.0, 2.0, 3.0])
    v = fnx.tensor([1.0, 1.0, 1.0], dtype=fnx.float64)
    x.clone().backward(v)
    assert not np.shares_memory(x.grad.numpy(), v.numpy())
    a, b = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    ((a + b) * 2.0).sum().backward()   # both leaves get the product's one gradient
    assert not np.shares_memory(a.grad.numpy(), b.grad.numpy())
    c, kept = leaf([1.0, 2.0]), []
    y = c.clone()
    y.register_hook(kept.append)
    (y * 3.0).sum().backward()
    assert not np.shares_memory(c.grad.numpy(), kept[0].numpy())
    w = leaf(np.ones((5, 2)))
    F.embedding(fnx.tensor([1, 3, 1]), w).sum().backward()
    F.embedding(fnx.tensor([0]), w).sum().backward()   # a taken gradient accumulates in place as a copy does
    np.testing.assert_array_equal(w.grad.numpy(), [[1, 1], [2, 2], [0, 0], [1, 1], [0, 0]])
    for t in (x, a, b, c):
        assert t.grad.numpy().flags.writeable


def test_a_gradient_that_nothing_else_holds_is_taken_without_a_copy():
    """As PyTorch's AccumulateGrad steals it: a leaf's first gradient, its node's last cotangent (a weight's, as a
    product's or a convolution's vjp returns it last), goes into .grad as it is, not copied."""
    made = []

    class Scale(Function):
        @staticmethod
        def forward(ctx, x, w):
            return x * w

        @staticmethod
        def backward(ctx, g):
            gw = g * 2.0
            made.append(id(gw.numpy()))
            return g * 1.0, gw

    x, w = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    Scale.apply(x, w).sum().backward()
    assert id(w.grad.numpy()) == made[0] and w.grad.tolist() == [2.0, 2.0]


def test_backward_twice_needs_retain_graph():
    x = leaf([1.0, 2.0])
    y = (x.exp() * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match=r"Trying to backward through the graph a second time.*retain_graph=True"):
        y.backward()


def test_retain_graph_allows_a_second_backward():
    x = leaf([1.0, 2.0])
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    first = x.grad.tolist()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.array(first))


def test_non_scalar_backward_needs_gradient():
    x = leaf([1.0, 2.0])
    y = x * 3
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        y.backward()
    y.backward(gradient=fnx.tensor([1.0, 10.0], dtype=fnx.float64))
    assert x.grad.tolist() == [3.0, 30.0]
    with pytest.raises(RuntimeError, match="shape"):
        (x * 3).backward(gradient=fnx.ones(3, dtype=fnx.float64))


def test_one_element_non_scalar_backward_is_implicit():
    x = leaf([2.0])
    (x * x).backward()
    assert x.grad.tolist() == [4.0]


def test_backward_of_a_tensor_without_graph_raises():
    with pytest.raises(RuntimeError, match="does not require grad"):
        fnx.ones(2).sum().backward()


def test_backward_inputs_restricts_accumulation():
    a, b = leaf([1.0]), leaf([2.0])
    (a * b).sum().backward(inputs=[a])
    assert a.grad.tolist() == [2.0] and b.grad is None


def test_broadcasting_gradients_reduce_to_input_shape():
    a = fnx.ones(2, 3, requires_grad=True)
    b = fnx.ones(3, requires_grad=True)
    c = fnx.ones(2, 1, requires_grad=True)
    d = fnx.ones(1, 1, 1, requires_grad=True)
    (a * b * c * d * 2.0).sum().backward()
    assert a.grad.shape == (2, 3) and b.grad.shape == (3,) and c.grad.shape == (2, 1) and d.grad.shape == (1, 1, 1)
    assert b.grad.tolist() == [4.0, 4.0, 4.0] and c.grad.tolist() == [[6.0], [6.0]] and d.grad.item() == 12.0


def test_gradient_dtype_follows_the_leaf_through_conversions():
    x = fnx.tensor([1.0, 2.0], requires_grad=True)
    (x.double() ** 2).sum().backward()
    assert x.grad.dtype is fnx.float32 and x.grad.tolist() == [2.0, 4.0]


def test_detach_and_clone_in_graphs():
    x = leaf([3.0])
    (x * x.detach()).sum().backward()
    assert x.grad.tolist() == [3.0]
    x.grad = None
    (x.clone() * 2).sum().backward()
    assert x.grad.tolist() == [2.0]


# ---------------------------------------------------------------- higher order
def test_double_backward_of_cube():
    x = leaf([1.0, 2.0, -3.0])
    (g,) = fnx.autograd.grad((x ** 3).sum(), x, create_graph=True)
    assert g.requires_grad
    np.testing.assert_allclose(g.detach().numpy(), 3 * np.array([1.0, 4.0, 9.0]))
    (h,) = fnx.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), 6 * np.array([1.0, 2.0, -3.0]))


def test_backward_with_create_graph_builds_a_differentiable_grad():
    x = leaf([0.5, 1.5])
    (x ** 3).sum().backward(create_graph=True)
    g = x.grad
    assert g.requires_grad
    (h,) = fnx.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), 6 * np.array([0.5, 1.5]))


def test_gradient_penalty():
    """d/dw of |d/dx f(x, w)|^2 for f = sum(tanh(w x)): the pattern of WGAN-GP."""
    w = leaf([0.5, -1.0])
    x = leaf([1.0, 2.0])
    (gx,) = fnx.autograd.grad(fnx.tanh(x * w).sum(), x, create_graph=True)
    (gx * gx).sum().backward()
    wn, xn = np.array([0.5, -1.0]), np.array([1.0, 2.0])
    t = np.tanh(wn * xn)
    # gx = w (1 - t^2); d(gx^2)/dw = 2 gx ((1 - t^2) + w * (-2 t (1 - t^2) x))
    gxn = wn * (1 - t * t)
    expected = 2 * gxn * ((1 - t * t) - 2 * wn * t * (1 - t * t) * xn)
    np.testing.assert_allclose(w.grad.numpy(), expected, rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), 2 * gxn * (-2 * wn * t * (1 - t * t) * wn), rtol=1e-12)


# ---------------------------------------------------------------- autograd.grad
def test_grad_does_not_touch_dot_grad():
    x = leaf([1.0, 2.0])
    (g,) = fnx.autograd.grad((x * x).sum(), x)
    assert g.tolist() == [2.0, 4.0] and x.grad is None


def test_grad_allow_unused():
    a, b = leaf(1.0), leaf(2.0)
    with pytest.raises(RuntimeError, match="allow_unused=True"):
        fnx.autograd.grad(a * 2, [a, b])
    ga, gb = fnx.autograd.grad(a * 2, [a, b], allow_unused=True)
    assert ga.item() == 2.0 and gb is None
    ga, gb = fnx.autograd.grad(a * 2, [a, b], materialize_grads=True)
    assert gb.item() == 0.0


def test_grad_outputs_and_several_outputs():
    x = leaf([1.0, 2.0])
    y1, y2 = x * 2, x * x
    gx = fnx.autograd.grad([y1, y2], x, grad_outputs=[fnx.ones(2, dtype=fnx.float64),
                                                      fnx.tensor([1.0, 0.5], dtype=fnx.float64)])
    assert gx[0].tolist() == [4.0, 4.0]


def test_grad_with_respect_to_non_leaf():
    a = leaf(2.0)
    h = a * 3
    z = h * h
    (gh,) = fnx.autograd.grad(z, h, retain_graph=True)
    assert gh.item() == 12.0
    gh, ga = fnx.autograd.grad(z, [h, a])
    assert gh.item() == 12.0 and ga.item() == 36.0


def test_grad_input_must_require_grad():
    with pytest.raises(RuntimeError, match="does not require grad"):
        fnx.autograd.grad(leaf(1.0) * 2, fnx.ones(1))


def test_grad_inside_a_transform_is_rejected():
    with pytest.raises(RuntimeError, match="eager"):
        with fnx.core.new_main(fnx.core.EvalTrace):
            fnx.autograd.grad(leaf(1.0) * 2, leaf(1.0))


# ---------------------------------------------------------------- in-place and version counters
def test_inplace_change_of_a_saved_input_raises():
    x = leaf([1.0, 2.0])
    y = x * 2
    z = y * y  # saves y
    y.mul_(2)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation.*MulBackward.*version 1; expected "
                                           r"version 0"):
        z.sum().backward()


def test_inplace_change_of_a_saved_output_raises():
    x = leaf([1.0, 2.0])
    y = x.exp()  # exp saves its output
    y.add_(1)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation.*ExpBackward"):
        y.sum().backward()


def test_inplace_change_of_an_unsaved_value_is_fine():
    x = leaf([1.0, 2.0])
    y = x * 2
    z = y + 1  # add saves nothing
    y.mul_(5)
    z.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_inplace_on_leaf_that_requires_grad_raises():
    x = leaf([1.0])
    for op in (lambda: x.add_(1), lambda: x.mul_(2), lambda: x.zero_(), lambda: x.fill_(1.0),
               lambda: x.copy_(fnx.ones(1))):
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad.*in-place.*no_grad"):
            op()


def test_inplace_on_non_leaf_gives_right_gradients():
    x = leaf([1.0, 2.0])
    y = x * 2
    y.add_(1)
    y.mul_(3)
    assert not y.is_leaf and "Mul" in y.grad_fn.name
    y.sum().backward()
    assert x.grad.tolist() == [6.0, 6.0]
    x.grad = None
    y = x * x
    y.mul_(x)  # x^3
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 12.0]


def test_inplace_with_a_grad_requiring_operand_on_a_plain_tensor():
    x = leaf([1.0, 2.0])
    buf = fnx.zeros(2, dtype=fnx.float64)
    buf.add_(x * 3)
    assert buf.requires_grad and not buf.is_leaf
    buf.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


# ---------------------------------------------------------------- grad modes
def test_no_grad_and_enable_grad_contexts():
    x = leaf([1.0])
    with fnx.no_grad():
        assert not (x * 2).requires_grad and not fnx.is_grad_enabled()
        with fnx.enable_grad():
            assert (x * 2).requires_grad
        assert not (x * 2).requires_grad
    assert fnx.is_grad_enabled() and (x * 2).requires_grad


def test_grad_modes_as_decorators():
    x = leaf([1.0])

    @fnx.no_grad()
    def f(t):
        return t * 2

    @fnx.no_grad
    def f_bare(t):
        return t * 2

    @fnx.enable_grad()
    def g(t):
        return t * 2

    @fnx.inference_mode()
    def h(t):
        return t * 2

    @fnx.inference_mode
    def h_bare(t):
        return t * 2

    @fnx.set_grad_enabled(False)
    def k(t):
        return t * 2

    assert fnx.is_grad_enabled()  # defining k did not switch grad mode off
    assert not f(x).requires_grad and not f_bare(x).requires_grad
    assert not h(x).requires_grad and not h_bare(x).requires_grad and not k(x).requires_grad
    with fnx.no_grad():
        assert g(x).requires_grad
    assert fnx.is_grad_enabled()
    assert f.__name__ == "f"


def test_set_grad_enabled_as_function_and_context():
    x = leaf([1.0])
    try:
        fnx.set_grad_enabled(False)
        assert not fnx.is_grad_enabled() and not (x * 2).requires_grad
    finally:
        fnx.set_grad_enabled(True)
    with fnx.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert fnx.is_grad_enabled()
    with fnx.no_grad():
        with fnx.set_grad_enabled(True):
            assert (x * 2).requires_grad
        assert not fnx.is_grad_enabled()


def test_inference_mode():
    x = leaf([1.0])
    with fnx.inference_mode():
        assert not (x * 2).requires_grad
    with fnx.inference_mode(False):
        assert (x * 2).requires_grad
    assert fnx.is_grad_enabled()


def test_grad_mode_restored_after_an_exception():
    with pytest.raises(ValueError):
        with fnx.no_grad():
            raise ValueError
    assert fnx.is_grad_enabled()


# ---------------------------------------------------------------- hooks and retain_grad
def test_leaf_hook_replaces_gradient_and_can_be_removed():
    x = leaf([1.0, 2.0])
    seen = []
    handle = x.register_hook(lambda g: seen.append(g.tolist()) or g * 10)
    (x * 3).sum().backward()
    assert seen == [[3.0, 3.0]] and x.grad.tolist() == [30.0, 30.0]
    handle.remove()
    x.grad = None
    (x * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0] and len(seen) == 1


def test_non_leaf_hook():
    x = leaf([1.0, 2.0])
    y = x * 2
    seen = []
    y.register_hook(lambda g: seen.append(g.tolist()))
    y.register_hook(lambda g: g + 1)
    (y * 5).sum().backward()
    assert seen == [[5.0, 5.0]]
    assert x.grad.tolist() == [12.0, 12.0]


def test_leaf_hook_fires_once_with_the_whole_gradient():
    x = leaf([1.0, 2.0])
    seen = []
    x.register_hook(lambda g: seen.append(g.tolist()))
    (x * x).sum().backward()  # two contributions, x and x: the hook sees their sum, once
    assert seen == [[2.0, 4.0]] and x.grad.tolist() == [2.0, 4.0]


def test_leaf_hook_result_is_what_accumulates():
    x = leaf([1.0, 2.0])
    x.register_hook(lambda g: g + 1)  # applied once to 2x, not to each of the two contributions
    (x * x).sum().backward()
    assert x.grad.tolist() == [3.0, 5.0]
    assert fnx.autograd.grad((x * x).sum(), x)[0].tolist() == [3.0, 5.0]  # captured gradients pass it too


def test_leaf_hook_fires_once_per_backward_call():
    x = leaf([1.0, 2.0])
    seen = []
    x.register_hook(lambda g: seen.append(g.tolist()))
    (x * x).sum().backward()
    (x * x * 3).sum().backward()
    assert seen == [[2.0, 4.0], [6.0, 12.0]] and x.grad.tolist() == [8.0, 16.0]


def test_non_leaf_hook_fires_once_with_the_whole_gradient():
    x = leaf([1.0, 2.0])
    y = x * 2
    seen = []
    y.register_hook(lambda g: seen.append(g.tolist()) or g * g)
    ((y * 3).sum() + y.sum()).backward()  # two consumers of y: 3 + 1
    assert seen == [[4.0, 4.0]] and x.grad.tolist() == [32.0, 32.0]


def test_retain_grad_sees_every_hook_and_the_whole_gradient():
    x = leaf([1.0, 2.0])
    y = x * 2
    y.retain_grad()
    y.register_hook(lambda g: g + 1)  # registered after retain_grad, runs before it (as in PyTorch)
    (y * y).sum().backward()
    assert y.grad.tolist() == [5.0, 9.0] and x.grad.tolist() == [10.0, 18.0]


def test_hook_on_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        fnx.ones(1).register_hook(lambda g: g)


def test_retain_grad():
    x = leaf([1.0, 2.0])
    y = x * 2
    y.retain_grad()
    z = (y * y).sum()
    z.backward(retain_graph=True)
    assert y.grad.tolist() == [4.0, 8.0]
    z.backward()
    assert y.grad.tolist() == [8.0, 16.0]
    x.retain_grad()  # a no-op on leaves
    with pytest.raises(RuntimeError, match="requires_grad=False"):
        fnx.ones(1).retain_grad()


# ---------------------------------------------------------------- autograd.Function
class ScaledMul(Function):
    @staticmethod
    def forward(ctx, a, b, scale):
        ctx.save_for_backward(a, b)
        ctx.scale = scale
        ctx.seen_needs = ctx.needs_input_grad
        return a * b * scale

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return (g * b * ctx.scale if ctx.needs_input_grad[0] else None,
                g * a * ctx.scale if ctx.needs_input_grad[1] else None, None)


def test_function_save_for_backward_and_non_tensor_args():
    a, b = leaf([1.0, 2.0]), fnx.tensor([3.0, 4.0], dtype=fnx.float64)
    out = ScaledMul.apply(a, b, 2.0)
    assert out.requires_grad and "ScaledMul" in out.grad_fn.name
    out.sum().backward()
    assert a.grad.tolist() == [6.0, 8.0] and b.grad is None


def test_function_needs_input_grad():
    seen = []

    class Probe(Function):
        @staticmethod
        def forward(ctx, a, b, k):
            seen.append(ctx.needs_input_grad)
            return a + b

        @staticmethod
        def backward(ctx, g):
            return g, g, None

    Probe.apply(leaf([1.0]), fnx.ones(1, dtype=fnx.float64), 3)
    assert seen == [(True, False, False)]


def test_function_forward_runs_without_recording():
    class Inner(Function):
        @staticmethod
        def forward(ctx, a):
            inner = a * 2
            assert not inner.requires_grad
            return inner

        @staticmethod
        def backward(ctx, g):
            return g * 2

    out = Inner.apply(leaf([1.0]))
    assert out.requires_grad


def test_function_multiple_outputs_and_non_differentiable():
    class SplitStats(Function):
        @staticmethod
        def forward(ctx, x):
            idx = fnx.argmax(x)
            ctx.mark_non_differentiable(idx)
            return x * 2, x * 3, idx

        @staticmethod
        def backward(ctx, g2, g3, g_idx):
            return g2 * 2 + g3 * 3

    x = leaf([1.0, 5.0])
    p, q, i = SplitStats.apply(x)
    assert not i.requires_grad and p.requires_grad and q.requires_grad and i.item() == 1
    (p.sum() + 10 * q.sum()).backward()
    assert x.grad.tolist() == [32.0, 32.0]
    x.grad = None
    p, q, _ = SplitStats.apply(x)
    p.sum().backward()  # q's gradient is materialised as zeros
    assert x.grad.tolist() == [2.0, 2.0]


def test_function_saved_tensor_version_check():
    x = leaf([1.0, 2.0])
    y = x * 1
    out = ScaledMul.apply(y, y, 1.0)
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_function_backward_twice_needs_retain_graph():
    x = leaf([1.0, 2.0])
    out = ScaledMul.apply(x, x, 1.0).sum()
    out.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        out.backward()


def test_function_wrong_number_of_gradients():
    class Bad(Function):
        @staticmethod
        def forward(ctx, a, b):
            return a + b

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        Bad.apply(leaf([1.0]), leaf([2.0])).sum().backward()


def test_function_without_grad_inputs_records_nothing():
    out = ScaledMul.apply(fnx.ones(2), fnx.ones(2), 2.0)
    assert not out.requires_grad and out.grad_fn is None


# ---------------------------------------------------------------- anomaly detection and gradcheck
def test_detect_anomaly_names_the_forward_op():
    x = leaf([0.0, 1.0])
    with fnx.autograd.detect_anomaly():
        y = fnx.sqrt(x) * 0.0  # d sqrt/dx is inf at 0; times the zero upstream gradient: nan
        with pytest.raises(RuntimeError, match=r"'SqrtBackward' returned nan values") as info:
            y.sum().backward()
    message = str(info.value)
    assert "test_autograd.py" in message and "fnx.sqrt(x)" in message
    assert "fnx/ops" not in message.replace("\\", "/")  # the traceback ends at the user's call
    assert not fnx.autograd.is_anomaly_enabled()


def test_detect_anomaly_names_the_forward_call_of_an_fnx_layer():
    """nn.Linear's own tape node (record_one) keeps the forward traceback too."""
    x = leaf([[1.0, 2.0]])
    w = fnx.tensor([[math.inf, 1.0]], dtype=x.dtype)
    with fnx.autograd.detect_anomaly():
        y = fnx.nn.functional.linear(x, w) * 0.0   # d input = 0 * inf: nan
        with pytest.raises(RuntimeError, match=r"returned nan values") as info:
            y.sum().backward()
    assert "fnx.nn.functional.linear(x, w)" in str(info.value)


def test_without_anomaly_mode_nan_gradients_pass_silently():
    x = leaf([0.0, 1.0])
    with np.errstate(all="ignore"):
        (fnx.sqrt(x) * 0.0).sum().backward()
    assert math.isnan(x.grad.tolist()[0])


def test_detect_anomaly_as_decorator_and_with_functions():
    class NanGrad(Function):
        @staticmethod
        def forward(ctx, a):
            return a * 1

        @staticmethod
        def backward(ctx, g):
            return g * math.nan

    @fnx.autograd.detect_anomaly()
    def run():
        NanGrad.apply(leaf([1.0])).sum().backward()

    with pytest.raises(RuntimeError, match="NanGradBackward' returned nan"):
        run()


def test_gradcheck_accepts_a_correct_function():
    x = leaf([0.3, -1.2, 2.0])
    y = leaf([[1.0, 2.0, 3.0]])
    assert fnx.autograd.gradcheck(lambda a, b: (fnx.sin(a) * b + a * a, fnx.exp(b)), (x, y))
    assert fnx.autograd.gradcheck(ScaledMul.apply, (x, leaf([1.0, 2.0, 3.0]), 2.0))


def test_gradcheck_rejects_a_wrong_backward():
    class WrongSquare(Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return g * a  # should be 2 a

    x = leaf([1.0, 2.0])
    with pytest.raises(fnx.autograd.GradcheckError, match="Jacobian mismatch for output 0 with respect to input 0"):
        fnx.autograd.gradcheck(WrongSquare.apply, (x,))
    assert fnx.autograd.gradcheck(WrongSquare.apply, (x,), raise_exception=False) is False


def test_gradcheck_needs_float64():
    with pytest.raises(RuntimeError, match="float64"):
        fnx.autograd.gradcheck(lambda a: a * 2, (fnx.ones(2, requires_grad=True),))


# ---------------------------------------------------------------- integers never get gradients
def test_integer_tensors_cannot_require_grad():
    with pytest.raises(RuntimeError, match="floating point"):
        fnx.tensor([1, 2]).requires_grad_()
    with pytest.raises(RuntimeError, match="floating point"):
        fnx.zeros(2, dtype=fnx.int64, requires_grad=True)
    with pytest.raises(RuntimeError, match="floating point"):
        fnx.tensor([True]).requires_grad = True


def test_integer_valued_outputs_have_no_grad_fn():
    x = leaf([1.0, 3.0, 2.0])
    for out in (fnx.argmax(x), fnx.eq(x, 1.0), x > 1, x.long(), x.int(), fnx.isnan(x), fnx.argmin(x)):
        assert out.grad_fn is None and not out.requires_grad
    y = x.floor()
    y.sum().backward()  # floor is differentiable almost everywhere, with zero gradient
    assert x.grad.tolist() == [0.0, 0.0, 0.0]


def test_requires_grad_false_on_non_leaf_raises():
    y = leaf([1.0]) * 2
    with pytest.raises(RuntimeError, match="leaf"):
        y.requires_grad_(False)
    assert y.detach().requires_grad is False


def test_numpy_on_requires_grad_raises():
    x = leaf([1.0])
    with pytest.raises(RuntimeError, match=r"numpy\(\).*requires grad.*detach\(\)\.numpy\(\)"):
        x.numpy()
    assert x.detach().numpy().tolist() == [1.0]
    assert x.numpy(force=True).tolist() == [1.0]


# ---------------------------------------------------------------- .grad storage
def test_leaf_grads_are_writable_and_not_shared():
    a, b = fnx.ones(3, requires_grad=True), fnx.ones(3, requires_grad=True)
    (a + b).sum().backward()  # both gradients come from one broadcast (read-only) array
    a.grad.mul_(2)
    assert a.grad.tolist() == [2.0, 2.0, 2.0] and b.grad.tolist() == [1.0, 1.0, 1.0]
    b.grad.zero_()
    assert b.grad.tolist() == [0.0, 0.0, 0.0]


def test_grad_does_not_alias_the_gradient_argument():
    x = fnx.ones(2, requires_grad=True)
    seed = fnx.tensor([1.0, 2.0])
    (x * 1).backward(gradient=seed)
    x.grad.zero_()
    assert seed.tolist() == [1.0, 2.0]


def test_accumulation_keeps_the_grad_tensor():
    x = fnx.ones(2, requires_grad=True)
    (x * 2).sum().backward()
    first = x.grad
    (x * 3).sum().backward()
    assert x.grad is first and first.tolist() == [5.0, 5.0]


# ---------------------------------------------------------------- in-place writes into views (CopySlices)
def _scale_column(w):
    x = w * 1.0
    x[:, 0] *= 2.0            # getitem view, in-place multiply, setitem of the view into its base
    return x


def _add_rows(w):
    x = w * w
    x[0].add_(x[1])
    return x


def _through_a_transpose(w):
    x = w * 1.0
    x.T.mul_(w.T)
    return x


def _view_of_a_view_and_siblings(w):
    x = fnx.exp(w) * 1.0
    flat = x.view(12)
    row, col = x[0], x[:, 1]
    flat[::5].mul_(2.0)       # every live view of x sees the write, in value and in gradient
    return x + flat.sum() + row.sum() * col.sum()


def _into_a_constant_buffer(w):
    x = fnx.zeros(3, 4, dtype=fnx.float64)
    x[1:].add_(w[:2])         # the buffer becomes part of the graph
    return x * x


def _into_a_whole_reshape_with_siblings(w):
    x = fnx.exp(w) * 1.0
    col, flat = x[:, 1], x.view(12)
    F.leaky_relu(flat.view(2, 6), 0.2, inplace=True)   # every element: no index_put; x, col and flat see it
    return x * col.sum() + flat.sum()


def _beside_an_expanded_view(w):
    x = w * 1.0
    wide = x.expand(2, 3, 4)
    x[0].mul_(2.0)            # the expanded view reads the written row twice: its node follows the write
    return wide * wide


@pytest.mark.parametrize("fn", [_scale_column, _add_rows, _through_a_transpose, _view_of_a_view_and_siblings,
                                _into_a_constant_buffer, _into_a_whole_reshape_with_siblings,
                                _beside_an_expanded_view],
                         ids=lambda f: f.__name__)
def test_in_place_writes_into_views_are_differentiable(fn):
    w = fnx.tensor(np.random.default_rng(0).standard_normal((3, 4)), requires_grad=True)
    assert fnx.autograd.gradcheck(fn, (w,))
    with fnx.no_grad():
        expected = fn(w.detach())
    np.testing.assert_array_equal(fn(w).detach().numpy(), expected.numpy())


def test_in_place_write_into_a_view_of_a_leaf_or_an_expanded_view_raises():
    w = fnx.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        w[0:2].mul_(2.0)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        (w * 1.0).expand(2, 3).add_(1.0)


def test_an_in_place_write_into_a_whole_reshape_binds_no_index_put(monkeypatch):
    """nn.LeakyReLU(inplace=True) after a convolution writes into a reshape of the product: the base takes the
    result reshaped, without scattering it through index_put at every position."""
    from fnx.ops import indexing

    calls = []
    impl = indexing.index_put_p.impl
    monkeypatch.setattr(indexing.index_put_p, "impl", lambda *a, **k: calls.append(1) or impl(*a, **k))
    w = fnx.randn(2, 6, requires_grad=True)
    y = F.leaky_relu((w * 2.0).reshape(3, 4), 0.1, inplace=True)
    y.sum().backward()
    assert calls == []
    np.testing.assert_allclose(w.grad.numpy(), np.where(w.detach().numpy() > 0, 2.0, 0.2), rtol=1e-6)


@pytest.mark.parametrize("which", [0, 1])
def test_an_in_place_write_to_either_saved_operand_fails_the_backward(which):
    """mul saves both operands: a write to either after the product is recorded names that input in the error."""
    a = fnx.tensor([1.0, 2.0], requires_grad=True)
    b = fnx.tensor([3.0, 4.0], requires_grad=True)
    x, y = a * 1.0, b * 1.0
    z = x * y
    with fnx.no_grad():
        (x, y)[which].add_(1.0)
    with pytest.raises(RuntimeError, match=f"input {which} of MulBackward"):
        z.sum().backward()
