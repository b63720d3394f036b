"""What an eager op costs in dispatch: the tape nodes it records, and that the shortcuts taken to keep eager
dispatch cheap give the results of the general path."""
import numpy as np
import pytest

import fnx
import fnx.nn.functional as F
from fnx import core

RNG = np.random.default_rng(3)


def _recorded(monkeypatch) -> list:
    """The names of the primitives recorded on the tape from now on."""
    nodes = []
    record = core.record_hook

    def counting_record(prim, args, params, out):
        nodes.append(prim.name)
        return record(prim, args, params, out)

    monkeypatch.setattr(core, "record_hook", counting_record)
    return nodes


@pytest.mark.parametrize("lead", [(6,), (2, 3), (2, 1, 3)])
def test_linear_records_one_node_for_any_number_of_leading_dims(monkeypatch, lead):
    x = fnx.tensor(RNG.standard_normal(lead + (4,)), requires_grad=True)
    w = fnx.tensor(RNG.standard_normal((5, 4)), requires_grad=True)
    b = fnx.tensor(RNG.standard_normal(5), requires_grad=True)
    nodes = _recorded(monkeypatch)
    y = F.linear(x, w, b)
    assert nodes == [] and y.grad_fn.name == "_LinearBackward"
    assert all(p is q for p, q in zip(y.grad_fn.parents, (x, w, b)))   # no reshape node before the input
    np.testing.assert_allclose(y.detach().numpy(), x.detach().numpy() @ w.detach().numpy().T + b.detach().numpy(),
                               rtol=1e-12)
    y.backward(fnx.ones(*y.shape, dtype=y.dtype))
    want = np.ones(lead + (5,))
    np.testing.assert_allclose(x.grad.numpy(), want @ w.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), want.reshape(-1, 5).T @ x.detach().numpy().reshape(-1, 4),
                               rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), want.reshape(-1, 5).sum(0), rtol=1e-12)


def test_shape_is_a_size_equal_to_the_array_shape():
    for shape in [(), (3,), (2, 0, 4)]:
        t = fnx.zeros(*shape)
        assert isinstance(t.shape, fnx.Size) and t.shape == shape and t.shape == fnx.ones(*shape).shape
        assert tuple(t.shape[1:]) == shape[1:] and isinstance(t.shape[1:], fnx.Size)


def test_backward_walk_visits_each_node_once_with_summed_cotangents():
    """A diamond (two paths from x to the loss) and a long chain: each node's vjp runs once, after all of its
    consumers, with the sum of what they sent."""
    x = fnx.tensor([1.0, 2.0], requires_grad=True)
    a = x * 3.0
    loss = (a * a + a).sum()
    y = x
    for _ in range(200):
        y = y + 0.0
    (loss + y.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * (2 * 3 * np.array([1.0, 2.0]) + 1) + 1)


def test_parameters_and_modules_follow_named_order_with_sharing():
    """parameters() and modules() skip building names; they list what the named forms list, in their order,
    each shared module or parameter once (at its first place)."""
    shared = fnx.nn.Linear(2, 2)
    inner = fnx.nn.Sequential(fnx.nn.Linear(2, 3), shared)
    net = fnx.nn.Sequential(inner, fnx.nn.ReLU(), shared, fnx.nn.Sequential(shared, fnx.nn.Linear(2, 1)))
    net[3][1].weight = inner[0].weight   # a parameter shared between modules
    assert [id(m) for m in net.modules()] == [id(m) for _, m in net.named_modules()]
    assert [id(p) for p in net.parameters()] == [id(p) for _, p in net.named_parameters()]
    assert [id(p) for p in net.parameters(recurse=False)] == []
    assert len(list(net.parameters())) == 5


@pytest.mark.parametrize("dtype,tol", [(fnx.float64, 1e-12), (fnx.float32, 2e-5), (fnx.float16, 2e-2)])
@pytest.mark.parametrize("affine", [True, False])
def test_small_layer_norm_node_on_arrays_matches_the_composition(dtype, tol, affine):
    """Below the C loops' size the eager node computes on the arrays: its values and gradients are those of the
    composition that the transforms see (fnx.vjp)."""
    x = fnx.tensor(RNG.standard_normal((2, 3, 5)), dtype=dtype, requires_grad=True)
    w, b = (fnx.tensor(RNG.standard_normal(5), dtype=dtype, requires_grad=True) if affine else None for _ in "wb")
    g = fnx.tensor(RNG.standard_normal((2, 3, 5)), dtype=dtype)
    y = F.layer_norm(x, (5,), w, b)
    assert y.grad_fn.name == "_LayerNormBackward" and y.dtype == dtype
    y.backward(g)
    args = (x, w, b) if affine else (x,)
    want, pull = fnx.vjp(lambda *a: F.layer_norm(a[0], (5,), *a[1:]), *[a.detach() for a in args])
    np.testing.assert_allclose(y.detach().float().numpy(), want.float().numpy(), rtol=tol, atol=tol)
    for a, grad in zip(args, pull(g)):
        assert a.grad.dtype == dtype
        np.testing.assert_allclose(a.grad.float().numpy(), grad.float().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("shape", [(5, 4), (3, 4, 2), (4,)])
def test_cross_entropy_node_matches_the_composition(reduction, weighted, shape):
    """Eager cross_entropy over class indices records one node (log_softmax and nll; unbatched, an nll node after
    log_softmax's); its value, gradient and (create_graph) second derivative are the composition's, which the
    transforms see, ignored targets included."""
    x = fnx.tensor(RNG.standard_normal(shape), requires_grad=True)
    target = fnx.tensor(RNG.integers(0, 4, (shape[0],) + shape[2:] if len(shape) > 1 else ()))
    if target.ndim:
        target[0] = -100
    weight = fnx.tensor(RNG.random(4)) if weighted else None

    def loss(a):
        return F.cross_entropy(a, target, weight=weight, reduction=reduction)

    y = loss(x)
    g = fnx.tensor(RNG.standard_normal(tuple(y.shape)))
    (gx,) = fnx.autograd.grad(y, x, g, create_graph=True)
    (gx * gx).sum().backward()
    want, pull = fnx.vjp(loss, x.detach())
    np.testing.assert_allclose(y.detach().numpy(), want.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gx.detach().numpy(), pull(g)[0].numpy(), rtol=1e-12, atol=1e-15)
    second = fnx.grad(lambda a: (fnx.vjp(loss, a)[1](g)[0] ** 2).sum())(x.detach())
    np.testing.assert_allclose(x.grad.numpy(), second.numpy(), rtol=1e-10, atol=1e-14)
    if len(shape) > 1:   # batched: one node for log_softmax and nll; unbatched: log_softmax's node, then nll's
        assert y.grad_fn.name == "_CrossEntropyBackward"
    elif reduction != "none":
        assert y.grad_fn.name == "_NllLossBackward"


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cross_entropy_on_large_logits_runs_nll_in_c_with_numpys_gradient(reduction, dtype, monkeypatch):
    """From nn_kernels.ROW_MIN_ELEMENTS logits on, nll's picking and sums and the whole backward run in C: the value
    (summed in double) within an ulp of numpy's, the gradient numpy's bits (its scatter and log_softmax's backward),
    ignored targets included; under create_graph the backward computes nll's scatter from the saved targets and
    second derivatives hold."""
    from fnx.lowering import nn_kernels

    n, c = 30, 27   # a small model's logits
    assert n * c >= nn_kernels.ROW_MIN_ELEMENTS
    x = fnx.tensor(RNG.standard_normal((n, c)) * 3, dtype=dtype, requires_grad=True)
    target = fnx.tensor(RNG.integers(0, c, n))
    target[::7] = -1

    def loss(a):
        return F.cross_entropy(a, target, ignore_index=-1, reduction=reduction)

    calls, found = [], {}
    for name in ("nll_rows", "cross_entropy_backward"):
        found[name] = getattr(nn_kernels, name)
        monkeypatch.setattr(nn_kernels, name, lambda *a, _n=name: calls.append(_n) or found[_n](*a))
    y = loss(x)
    g = fnx.tensor(RNG.standard_normal(tuple(y.shape)), dtype=dtype)
    (gx,) = fnx.autograd.grad(y, x, g)
    assert calls == ["nll_rows", "cross_entropy_backward"]
    monkeypatch.setattr(nn_kernels, "nll_rows", lambda *a: None)   # numpy's nll
    y_np = loss(x)
    (gx_np,) = fnx.autograd.grad(y_np, x, g)
    tol = 1e-6 if dtype == "float32" else 1e-13   # a row's loss: its logits' size (about 10) times the dtype's eps
    np.testing.assert_allclose(y.detach().numpy(), y_np.detach().numpy(), rtol=tol, atol=10 * tol)
    np.testing.assert_array_equal(gx.numpy(), gx_np.numpy())
    xd = x.detach().double().numpy()
    lp = xd - xd.max(1, keepdims=True)
    lp -= np.log(np.exp(lp).sum(1, keepdims=True))
    kept = target.numpy() != -1
    rows = np.where(kept, -lp[np.arange(n), np.where(kept, target.numpy(), 0)], 0.0)
    expected = {"none": rows, "sum": rows.sum(), "mean": rows.sum() / kept.sum()}[reduction]
    np.testing.assert_allclose(y.detach().double().numpy(), expected, rtol=tol, atol=10 * tol)
    monkeypatch.setattr(nn_kernels, "nll_rows", found["nll_rows"])
    (gx2,) = fnx.autograd.grad(loss(x), x, g, create_graph=True)
    np.testing.assert_array_equal(gx2.detach().numpy(), gx.numpy())
    (gx2 * gx2).sum().backward()
    second = fnx.grad(lambda a: (fnx.vjp(loss, a)[1](g)[0] ** 2).sum())(x.detach())
    np.testing.assert_allclose(x.grad.numpy(), second.numpy(), rtol=tol * 10, atol=tol)


def test_cross_entropy_on_large_logits_checks_its_targets():
    """The C path raises the bounds error of the numpy path for a bad target, and refuses a backward after its
    targets were changed in place (their indices are read then)."""
    x = fnx.tensor(RNG.standard_normal((300, 27)), requires_grad=True)
    target = fnx.tensor(RNG.integers(0, 27, 300))
    target[5] = 27
    with pytest.raises(IndexError, match="cross_entropy: Target 27 is out of bounds"):
        F.cross_entropy(x, target)
    target[5] = 3
    far = F.cross_entropy(x, target, ignore_index=1 << 70)   # beyond int64: numpy's path, no target ignored
    np.testing.assert_allclose(far.item(), F.cross_entropy(x, target, ignore_index=-1).item(), rtol=1e-12)
    y = F.cross_entropy(x, target)
    target[5] = 4
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_cross_entropy_node_second_derivative_through_a_computed_input():
    """Logits that an op made (not a leaf): under create_graph the one cross_entropy node puts log_softmax's node
    on the tape over the op's node, so the second derivative reaches the op's input as the composition's does."""
    w = fnx.tensor(RNG.standard_normal((3, 4)), requires_grad=True)
    x = fnx.tensor(RNG.standard_normal((5, 3)))
    target = fnx.tensor([0, 3, -100, 1, 2])

    def loss(w):
        return F.cross_entropy(x @ w, target)

    y = loss(w)
    assert y.grad_fn.name == "_CrossEntropyBackward"
    (gw,) = fnx.autograd.grad(y, w, create_graph=True)
    (gw ** 2).sum().backward()
    want = fnx.grad(lambda a: (fnx.grad(loss)(a) ** 2).sum())(w.detach())
    np.testing.assert_allclose(gw.detach().numpy(), fnx.grad(loss)(w.detach()).numpy(), rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), want.numpy(), rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("add_at_max", [0, 1 << 30])
@pytest.mark.parametrize("shape,dim", [((6, 3), 0), ((2, 5, 3), 1), ((4,), 0)])
def test_scatter_add_paths_match_add_at(monkeypatch, add_at_max, shape, dim):
    """index_put's accumulation over one index array gives np.add.at's bits on both of its paths: numpy's
    generic loop (small regions) and the flat positions (larger ones), repeated and negative indices included."""
    from fnx.ops import indexing

    monkeypatch.setattr(indexing, "_ADD_AT_MAX", add_at_max)
    x = RNG.standard_normal(shape).astype(np.float32)
    idx = np.array([0, -1, 2, 0, 1, 2, -1], dtype=np.int64)
    where = (slice(None),) * dim + (idx,)
    values = RNG.standard_normal(x[where].shape).astype(np.float32)
    want = x.copy()
    np.add.at(want, where, values)
    got = indexing.index_put_p.impl(np, x, values, idx, dims=(dim,), accumulate=True)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_add_and_sub_cotangents_off_the_tape_match_their_rules(dtype, monkeypatch):
    """A backward that records nothing negates sub's cotangent on the array (no neg op) and sums a broadcast
    operand's: the bits of the rules' own binds, which create_graph runs (1 - x, x - y, a row added and
    subtracted)."""
    from fnx.ops import elementwise

    shape = (3, 4, 5)
    x, y = (fnx.tensor(RNG.standard_normal(shape), dtype=dtype, requires_grad=True) for _ in range(2))
    row = fnx.tensor(RNG.standard_normal(shape[-1:]), dtype=dtype, requires_grad=True)
    weights = fnx.tensor(RNG.standard_normal(shape), dtype=dtype)

    def loss():
        return (((1 - x) * weights + (x - y) * 2.0 + (y + row) - row) * weights).sum()

    leaves = [x, y, row]
    negations, neg = [], elementwise.neg
    monkeypatch.setattr(elementwise, "neg", lambda t: negations.append(t) or neg(t))
    plain = fnx.autograd.grad(loss(), leaves, retain_graph=True)
    assert negations == []
    recorded = fnx.autograd.grad(loss(), leaves, create_graph=True)
    for got, want in zip(plain, recorded):
        assert got.dtype == want.dtype and np.array_equal(got.numpy(), want.detach().numpy())
    w = weights.numpy()
    np.testing.assert_allclose(plain[0].numpy(), -w * w + 2 * w, rtol=1e-6)
    np.testing.assert_allclose(plain[2].numpy(), np.zeros(shape[-1]), atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_mul_and_cat_cotangents_off_the_tape_match_their_rules(dtype, dim):
    """A backward that records nothing computes mul's and cat's cotangents on the arrays (mul's products, numpy's
    views of g); they are the bits of the rules' own binds, which create_graph runs: operands of one shape, a
    broadcast operand (the rule's path), a constant operand and a cat along each dim."""
    shape = (3, 4, 5)
    a, b, c = (fnx.tensor(RNG.standard_normal(shape), dtype=dtype, requires_grad=True) for _ in range(3))
    row = fnx.tensor(RNG.standard_normal(shape[-1:]), dtype=dtype, requires_grad=True)
    const = fnx.tensor(RNG.standard_normal(shape), dtype=dtype)
    parts = (a * b, c * row, const * c)
    weights = fnx.tensor(RNG.standard_normal(fnx.cat(parts, dim).shape), dtype=dtype)

    def loss():
        return (fnx.cat(parts, dim) * weights).sum()

    leaves = [a, b, c, row]
    plain = fnx.autograd.grad(loss(), leaves, retain_graph=True)
    recorded = fnx.autograd.grad(loss(), leaves, create_graph=True)
    for got, want in zip(plain, recorded):
        assert got.dtype == want.dtype and np.array_equal(got.numpy(), want.detach().numpy())
    first = np.split(weights.numpy(), 3, axis=dim)[0]   # the cotangent of a * b
    np.testing.assert_array_equal(plain[0].numpy(), first * b.detach().numpy())
