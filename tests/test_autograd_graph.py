"""torch.autograd's extras: graph.saved_tensors_hooks / save_on_cpu / disable_saved_tensors_hooks, gradgradcheck,
is_tensor_like; amp.custom_fwd / custom_bwd; func.functionalize and replace_all_batch_norm_modules_.
Expected values are PyTorch 2.13's (recorded) or closed forms."""
from __future__ import annotations

import numpy as np
import pytest

import fnx
from fnx.autograd.graph import disable_saved_tensors_hooks, save_on_cpu, saved_tensors_hooks


def t64(values, requires_grad: bool = False) -> fnx.Tensor:
    return fnx.tensor(np.asarray(values, dtype=np.float64), requires_grad=requires_grad)


X = [0.5, 1.5, -0.3]
W = [[1.0, 2.0], [0.1, -0.4], [0.3, 0.2]]


class Recorder:
    def __init__(self):
        self.packed, self.unpacked = [], 0

    def pack(self, t):
        self.packed.append(tuple(t.shape))
        return ("box", t.clone())

    def unpack(self, p):
        self.unpacked += 1
        return p[1]


def test_hooks_see_what_the_tape_saves_and_backward_matches_pytorch():
    x, w = t64(X, True), t64(W, True)
    rec = Recorder()
    with saved_tensors_hooks(rec.pack, rec.unpack):
        y = (fnx.tanh(x @ w) ** 2).sum()
    assert {(3,), (3, 2), (2,)} <= set(rec.packed) and rec.unpacked == 0
    y.backward(create_graph=True)
    assert rec.unpacked >= 3
    # PyTorch 2.13, the same program
    np.testing.assert_allclose(x.grad.detach().numpy(), [1.9232, -0.1585, 0.3431], atol=1e-4)
    np.testing.assert_allclose(w.grad.detach().numpy(), [[0.3769, 0.2924], [1.1307, 0.8771], [-0.2261, -0.1754]],
                               atol=1e-4)
    second = fnx.autograd.grad(x.grad.sum(), x)[0]   # create_graph went through the unpacked values
    np.testing.assert_allclose(second.numpy(), [4.8291, -0.8250, 0.5768], atol=1e-4)


def test_packed_values_are_what_backward_reads():
    x = t64(X, True)
    with saved_tensors_hooks(lambda t: t.detach() * 0 + 2.0, lambda p: p):   # a lying hook shows in the result
        y = fnx.exp(x).sum()   # exp's rule reads its saved output only
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0, 2.0])


def test_save_on_cpu_function_multi_output_and_errors():
    x = t64(X, True)
    with save_on_cpu():
        (fnx.exp(x) * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp(X) * (1 + np.array(X)))

    class Sq(fnx.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, g):
            a, = ctx.saved_tensors
            return 2 * a * g

    rec = Recorder()
    x.grad = None
    with saved_tensors_hooks(rec.pack, rec.unpack):
        y = Sq.apply(x).sum()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.array(X))
    assert rec.unpacked >= 1
    x.grad = None
    with saved_tensors_hooks(rec.pack, rec.unpack):
        a, b = fnx.chunk(fnx.sin(x.repeat(2)), 2)
        (a * b).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.8415, 0.1411, -0.5646], atol=1e-4)   # PyTorch's
    with saved_tensors_hooks(lambda t: t, lambda p: 3):
        y = (x * x).sum()
    with pytest.raises(TypeError, match="unpack_hook expected to be a Tensor"):
        y.backward()
    with disable_saved_tensors_hooks("no hooks here"):
        with pytest.raises(RuntimeError, match="no hooks here"):
            with saved_tensors_hooks(rec.pack, rec.unpack):
                pass
    with saved_tensors_hooks(rec.pack, rec.unpack), pytest.raises(NotImplementedError, match="checkpoint"):
        fnx.checkpoint(fnx.sin)(x)
    with saved_tensors_hooks(rec.pack, rec.unpack), pytest.raises(NotImplementedError, match="compile"):
        fnx.compile(lambda v: fnx.sin(v) * v)(x)


def test_gradgradcheck_and_is_tensor_like():
    x, w = t64(X, True), t64(W, True)
    assert fnx.autograd.gradgradcheck(lambda x, w: (fnx.sin(x)[:, None] * w ** 2).sum(0), (x, w))
    assert fnx.autograd.gradgradcheck(lambda x: x.abs() ** 3, (x,), (fnx.ones(3, dtype=fnx.float64,
                                                                               requires_grad=True),))

    class WrongSecond(fnx.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a ** 2

        @staticmethod
        def backward(ctx, g):
            a, = ctx.saved_tensors
            return g * 2 * a.detach()   # right gradient, wrong (zero) second derivative

    assert fnx.autograd.gradcheck(WrongSecond.apply, (x,))
    assert not fnx.autograd.gradgradcheck(WrongSecond.apply, (x,), raise_exception=False)
    assert fnx.autograd.is_tensor_like(x) and not fnx.autograd.is_tensor_like(1.0)


class _MM(fnx.autograd.Function):
    @staticmethod
    @fnx.amp.custom_fwd(device_type="cpu")
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a.mm(b)

    @staticmethod
    @fnx.amp.custom_bwd(device_type="cpu")
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        _MM.seen.append((fnx.is_autocast_enabled("cpu"), g.mm(b.t()).dtype))
        return g.mm(b.t()), a.t().mm(g)


class _MM32(_MM):
    @staticmethod
    @fnx.amp.custom_fwd(device_type="cpu", cast_inputs=fnx.float32)
    def forward(ctx, a, b):
        _MM.seen.append((fnx.is_autocast_enabled("cpu"), a.dtype, b.dtype))
        ctx.save_for_backward(a, b)
        return a.mm(b)


def test_custom_fwd_bwd_as_pytorch():
    _MM.seen = []
    a = fnx.ones(2, 3, requires_grad=True)
    b = fnx.ones(3, 2, dtype=fnx.bfloat16, requires_grad=True)
    with fnx.autocast("cpu", dtype=fnx.bfloat16):
        y = _MM.apply(a, b)
        z = _MM32.apply(a, b)
    assert y.dtype is fnx.bfloat16 and z.dtype is fnx.float32
    assert _MM.seen == [(False, fnx.float32, fnx.float32)]
    y.float().sum().backward()
    assert _MM.seen[-1] == (True, fnx.bfloat16)
    assert a.grad.dtype is fnx.float32 and b.grad.dtype is fnx.bfloat16   # cast to the inputs' dtypes
    z.sum().backward()
    assert _MM.seen[-1] == (False, fnx.float32)
    with pytest.raises(ValueError, match="device_type"):
        fnx.amp.custom_fwd(device_type=None)
    with pytest.warns(FutureWarning, match="deprecated"):
        fnx.cuda.amp.custom_fwd(lambda ctx, x: x)


def test_functionalize_keeps_semantics_and_traces_without_mutation():
    def f(a):
        b = a + 1
        b.view(-1).add_(1)
        a.mul_(2)
        return b

    x = fnx.ones(2, 2)
    out = fnx.func.functionalize(f)(x)
    assert out.tolist() == [[3.0, 3.0]] * 2 and x.tolist() == [[2.0, 2.0]] * 2   # PyTorch's values
    jaxpr = str(fnx.make_jaxpr(fnx.func.functionalize(lambda a: a.clone().mul_(2).add_(1)))(fnx.ones(2)))
    eqns = [line.split("=")[1].split()[0] for line in jaxpr.splitlines() if "=" in line]
    assert eqns == ["copy", "mul", "add"]   # the in-place ops traced as their out-of-place forms
    with pytest.raises(RuntimeError, match="invalid argument for remove"):
        fnx.func.functionalize(f, remove="x")


def test_replace_all_batch_norm_modules_():
    m = fnx.nn.Sequential(fnx.nn.Linear(3, 3), fnx.nn.BatchNorm1d(3))
    assert fnx.func.replace_all_batch_norm_modules_(m) is m
    bn = m[1]
    assert bn.running_mean is None and bn.running_var is None and bn.num_batches_tracked is None
    assert not bn.track_running_stats
    out = fnx.func.vmap(m)(fnx.arange(24.0).reshape(2, 4, 3))
    assert abs(out.sum().item()) < 1e-4   # batch statistics per example, as in PyTorch
