"""core.bind_unary and core.bind_binary: the paths of `a + b`, `a * b`, `x.exp()`, ... on small CPU tensors call
numpy's function directly and record their node through `record_cpu_hook`; everything they do not cover goes
through `bind` (impl, its eager C kernels and layout care, the tape's checks), and the two paths agree."""
from __future__ import annotations

import operator
import threading

import numpy as np
import pytest

import fnx
from fnx import core
from fnx.autograd.graph import saved_tensors_hooks
from fnx.ops import elementwise as ew
from fnx.profiler import profile

OPS = [(ew.add_p, operator.add), (ew.sub_p, operator.sub), (ew.mul_p, operator.mul),
       (ew.div_p, operator.truediv), (ew.max_p, fnx.maximum), (ew.min_p, fnx.minimum),
       (ew.lt_p, operator.lt), (ew.eq_p, operator.eq), (ew.ge_p, operator.ge)]
UNARY = [(ew.neg_p, operator.neg), (ew.exp_p, fnx.exp), (ew.tanh_p, fnx.tanh), (ew.sqrt_p, fnx.sqrt),
         (ew.sin_p, fnx.sin), (ew.abs_p, abs), (ew.log1p_p, fnx.log1p), (ew.cos_p, fnx.cos),
         (ew.sign_p, fnx.sign), (ew.log_p, fnx.log)]


def _pair(dtype, shape=(3, 4), requires_grad=True):
    rng = np.random.default_rng(0)
    x = fnx.tensor(rng.uniform(0.5, 2.0, shape).astype(dtype), requires_grad=requires_grad)
    y = fnx.tensor(rng.uniform(0.5, 2.0, shape[-1:]).astype(dtype), requires_grad=requires_grad)
    return x, y


@pytest.fixture
def impl_counts(monkeypatch):
    """Counts the impl calls of each primitive of OPS (by name)."""
    counts = {}
    for prim, _ in OPS + UNARY:
        def counted(xp, *arrays, _impl=prim.impl, _name=prim.name, **params):
            counts[_name] = counts.get(_name, 0) + 1
            return _impl(xp, *arrays, **params)
        monkeypatch.setattr(prim, "impl", counted)
    return counts


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("prim, op", OPS, ids=[p.name for p, _ in OPS])
def test_the_direct_path_gives_binds_values_nodes_and_gradients(prim, op, dtype, impl_counts):
    grad = np.dtype(dtype).kind == "f"
    x, y = _pair(dtype, requires_grad=grad)
    out = op(x, y)
    assert prim.name not in impl_counts   # numpy's function, not impl
    ref = core.bind(prim, *(x, y) if prim is not ew.div_p or grad else (x.float(), y.float()))
    assert out.dtype == ref.dtype and out.shape == ref.shape and type(out._value) is np.ndarray
    np.testing.assert_array_equal(out.detach().numpy(), ref.detach().numpy())
    assert out._version == [0] and out._base is None and out.device == x.device
    assert out.requires_grad == ref.requires_grad and type(out.grad_fn) is type(ref.grad_fn)
    if out.requires_grad:
        assert out.grad_fn.name == ref.grad_fn.name and out.grad_fn.seq > ref.grad_fn.seq - 2
        got = fnx.autograd.grad(out.sum(), (x, y))
        want = fnx.autograd.grad(ref.sum(), (x, y))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w.numpy())


NATIVE = [(ew.sigmoid_p, fnx.sigmoid), (ew.erf_p, fnx.erf), (ew.erfc_p, fnx.erfc), (ew.gelu_p, fnx.nn.functional.gelu),
          (ew.gelu_tanh_p, lambda x: fnx.nn.functional.gelu(x, approximate="tanh")), (ew.silu_p, fnx.nn.functional.silu)]


@pytest.mark.parametrize("shape", [(3, 4), (32, 64)])
@pytest.mark.parametrize("prim, op", NATIVE, ids=[p.name for p, _ in NATIVE])
def test_native_unary_ops_take_the_direct_path_through_their_impl(prim, op, shape, monkeypatch):
    """An op numpy has no function of (sigmoid, erf, GELU, SiLU) calls its impl (its eager C kernel first, at any size) from
    `bind_unary` and records its node through `record_cpu_hook`, not bind's `record_hook`: the same values,
    node and gradient as bind's."""
    x, _ = _pair(np.float32, shape)
    general, record = [], core.record_hook
    monkeypatch.setattr(core, "record_hook", lambda *args: general.append(args[0].name) or record(*args))
    out = op(x)
    assert general == []
    ref = core.bind(prim, x)
    assert general == [prim.name]
    np.testing.assert_array_equal(out.detach().numpy(), ref.detach().numpy())
    assert out.grad_fn.name == ref.grad_fn.name and out._version == [0] and out._base is None
    np.testing.assert_array_equal(fnx.autograd.grad(out.sum(), x)[0].numpy(),
                                  fnx.autograd.grad(ref.sum(), x)[0].numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("prim, op", UNARY, ids=[p.name for p, _ in UNARY])
def test_the_direct_unary_path_gives_binds_values_nodes_and_gradients(prim, op, dtype, impl_counts):
    x, _ = _pair(dtype)
    out = op(x)
    assert prim.name not in impl_counts
    ref = core.bind(prim, x)
    assert out.dtype == ref.dtype and out.shape == ref.shape and type(out._value) is np.ndarray
    np.testing.assert_array_equal(out.detach().numpy(), ref.detach().numpy())
    assert out._version == [0] and out._base is None and out.requires_grad == ref.requires_grad
    if out.requires_grad:
        assert out.grad_fn.name == ref.grad_fn.name
        if prim.saves_output:
            assert out.grad_fn.out_value is out._value
        np.testing.assert_array_equal(fnx.autograd.grad(out.sum(), x)[0].numpy(),
                                      fnx.autograd.grad(ref.sum(), x)[0].numpy())
    big = fnx.ones(ew.exp_p.ufunc_below)
    fnx.exp(big)
    assert impl_counts.get("exp", 0) == 1 + (prim is ew.exp_p)   # its eager C kernel's size


def test_a_node_of_the_direct_path_keeps_what_its_rule_reads():
    x, y = _pair(np.float64)
    out = x * y
    assert out.grad_fn.inputs == (x, y) and out.grad_fn.versions == (0, 0)   # mul reads both inputs
    with fnx.no_grad():
        x.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()
    q = x.detach() / y   # div reads its output; x needs no gradient: a stand-in of its shape
    assert q.grad_fn.out_value is q._value and q.grad_fn.inputs[0] is not x
    big = fnx.ones(ew.add_p.ufunc_below, requires_grad=True)
    for out in (x + y, x - y, -x, fnx.floor(x), big + big):   # their rules read nothing of the output
        assert out.grad_fn.out_value is None and out.grad_fn.prim.vjp_ignores_out
    assert (x * y).grad_fn.out_value.shape == (3, 4)   # mul's reads its shape: a stand-in
    (big + big - fnx.floor(-big)).sum().backward()
    np.testing.assert_array_equal(big.grad.numpy(), np.full(big.shape, 2.0, np.float64))


def test_zero_dim_results_are_arrays():
    out = fnx.tensor(2.0, requires_grad=True) * fnx.tensor(3.0)
    assert type(out._value) is np.ndarray and out.shape == () and out.item() == 6.0 and out.grad_fn is not None
    out = fnx.exp(fnx.tensor(0.0, requires_grad=True))
    assert type(out._value) is np.ndarray and out.item() == 1.0 and out.grad_fn is not None


def test_large_strided_and_failing_operands_go_through_bind(impl_counts):
    big = fnx.ones(ew.add_p.ufunc_below)
    big + big
    assert impl_counts.get("add") == 1   # its eager C kernel's size
    x = fnx.tensor(np.arange(12.0).reshape(3, 4)).mT   # a strided 2-d first operand: impl keeps its layout
    out = x * fnx.ones(4, 3, dtype=x.dtype)
    assert impl_counts.get("mul") == 1 and out._value.flags.f_contiguous
    with pytest.raises(RuntimeError, match=r"add.*\[3\].*\[4\]"):
        fnx.ones(3) + fnx.ones(4)
    with pytest.raises(RuntimeError, match="the `-` operator, with two bool tensors is not supported"):
        fnx.ones(3, dtype=fnx.bool) - fnx.ones(3, dtype=fnx.bool)


def test_transforms_and_no_grad_take_their_own_paths(impl_counts):
    x, y = _pair(np.float32)
    with fnx.no_grad():
        out = x + y
    assert out.grad_fn is None and not out.requires_grad and "add" not in impl_counts
    g = fnx.grad(lambda a: (a * y).sum())(x)   # traced: the transform's rule, not the direct call
    np.testing.assert_allclose(g.detach().numpy(), np.broadcast_to(y.detach().numpy(), (3, 4)))


def test_saved_tensor_hooks_and_anomaly_mode_take_bind(impl_counts):
    x, y = _pair(np.float64)
    packed = []
    with saved_tensors_hooks(lambda t: packed.append(tuple(t.shape)) or t, lambda p: p):
        x * y
    assert packed == [(3, 4), (4,)] and impl_counts.get("mul") == 1
    x * y   # the hooks are gone: the direct path again
    assert impl_counts.get("mul") == 1 and not core._get_flags()
    with fnx.autograd.detect_anomaly():
        node = (x / y).grad_fn
        unary = fnx.exp(x).grad_fn
    assert node.stack and "test_direct_ufuncs.py" in "".join(node.stack) and impl_counts.get("div") == 1
    assert unary.stack and impl_counts.get("exp") == 1
    assert not core._get_flags()


def test_hooks_in_one_thread_leave_another_on_the_direct_path(impl_counts):
    x, y = _pair(np.float64)
    started, done = threading.Event(), threading.Event()

    def other():
        started.wait()
        x + y
        done.set()

    t = threading.Thread(target=other)
    t.start()
    with saved_tensors_hooks(lambda t: t, lambda p: p):
        started.set()
        done.wait(10)
    t.join()
    assert "add" not in impl_counts


def test_a_profile_and_the_debug_log_see_every_op():
    x, y = _pair(np.float32)
    with profile() as prof:
        fnx.exp(x + y)
    assert [e.name for e in prof.events()] == ["add", "exp"]
    assert core.direct_ufuncs   # back once the profile ends


VIEWS = [("reshape", lambda x: x.view(12)), ("transpose", lambda x: x.transpose(0, 1)),
         ("slice", lambda x: x[:, 1:3]), ("broadcast_to", lambda x: x.expand(2, 3, 4))]


@pytest.mark.parametrize("name, op", VIEWS, ids=[n for n, _ in VIEWS])
def test_view_nodes_take_record_cpu_and_join_their_bases_views(name, op, monkeypatch):
    """A view of a CPU tensor in grad mode records its node through `record_cpu` (as the ops of one or two CPU
    tensors do), which notes it among its base's views: a write to the base through another view refreshes it."""
    from fnx.autograd import tape
    seen, record_cpu = [], tape.record_cpu
    monkeypatch.setattr(tape, "record_cpu", lambda prim, *rest: seen.append(prim.name) or record_cpu(prim, *rest))
    leaf, _ = _pair(np.float64)
    x = leaf * 1.0
    v = op(x)
    assert seen == [name] and v._base is x and any(ref() is v for ref in x._views)
    before = v.grad_fn
    x[0].mul_(2.0)   # through another view of the base
    assert v.grad_fn is not before
    v.sum().backward()
    want = np.ones((3, 4)) * (np.ones((3, 4)) if name != "slice" else np.pad(np.ones((3, 2)), ((0, 0), (1, 1))))
    want[0] *= 2.0
    np.testing.assert_array_equal(leaf.grad.numpy(), want * (2 if name == "broadcast_to" else 1))
