"""What the eager tape keeps alive: only the values each vjp reads, and nothing after backward."""
import gc
import weakref

import numpy as np
import pytest

import fnx
import fnx.nn.functional as F
from fnx.autograd.tape import Node, stand_in


def is_stand_in(t) -> bool:
    """Whether `t` is the shared stand-in of its shape and dtype rather than a value a node saved."""
    return stand_in(t._value, t._device) is t


def _nodes(root):
    """The tape nodes reachable from tensor `root` (primitive nodes and autograd.Function nodes)."""
    out, stack, seen = [], [root.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or isinstance(node, fnx.Tensor) or id(node) in seen:
            continue
        seen.add(id(node))
        out.append(node)
        stack.extend(node.parents)
    return out


def _saved_arrays(node) -> list:
    """The arrays `node` holds (saved inputs and output), not counting what it records only the shape of."""
    if not isinstance(node, Node):   # an autograd.Function node (layer_norm): what ctx saved; a multiple-result
        ctx = getattr(node, "ctx", None)   # primitive's node (attention): what its pullback holds
        if ctx is not None and ctx.pull is not None:
            held = [cell.cell_contents for cell in ctx.pull.__closure__]
            return [t for value in held if isinstance(value, (list, tuple)) for t in value
                    if isinstance(t, fnx.Tensor) and not is_stand_in(t)]
        return list(ctx._saved) if ctx is not None and ctx._saved else []
    # a leaf input is kept as itself, which the node holds anyway as the parent its gradient flows to
    held = [] if node.inputs is None else [a for a in node.inputs
                                           if not is_stand_in(a) and not any(a is p for p in node.parents)]
    if node.out_value is not None and not (isinstance(node.out_value, fnx.Tensor) and is_stand_in(node.out_value)):
        held.append(node.out_value)
    return held


def _gpt_block_loss(rng):
    """A small nanoGPT-style block on (2, 8, 16) tokens: layer_norm, attention, GELU MLP, cross_entropy."""
    def param(*shape):
        return fnx.tensor(rng.standard_normal(shape).astype(np.float32) * 0.1, requires_grad=True)

    x = param(2, 8, 16)
    ln_w, ln_b, w_qkv, b_qkv, w_fc, w_out = param(16), param(16), param(48, 16), param(48), param(32, 16), param(5, 32)
    h = F.layer_norm(x, (16,), ln_w, ln_b)
    q, k, v = F.linear(h, w_qkv, b_qkv).split(16, dim=2)
    q, k, v = (t.view(2, 8, 2, 8).transpose(1, 2) for t in (q, k, v))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(2, 8, 16)
    logits = F.linear(F.gelu(F.linear(x + y, w_fc)), w_out)
    targets = fnx.tensor(rng.integers(0, 5, size=16))
    return F.cross_entropy(logits.view(-1, 5), targets), [x, ln_w, ln_b, w_qkv, b_qkv, w_fc, w_out]


def test_a_custom_function_node_keeps_only_what_ctx_saved():
    class Scale(fnx.autograd.Function):
        @staticmethod
        def forward(ctx, x, factor):
            ctx.factor = factor
            return x * factor

        @staticmethod
        def backward(ctx, g):
            return g * ctx.factor, None

    x = fnx.tensor([1.0, 2.0], requires_grad=True)
    t = x * 1.0
    y = Scale.apply(t, 3.0)
    ref = weakref.ref(t)
    del t
    gc.collect()
    assert ref() is None
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_after_backward_the_tape_holds_no_saved_tensors():
    loss, params = _gpt_block_loss(np.random.default_rng(0))
    nodes = _nodes(loss)
    assert len(nodes) > 20 and any(_saved_arrays(n) for n in nodes)
    assert {"_LayerNormBackward", "attentionBackward"} <= {n.name for n in nodes}
    loss.backward()
    assert all(p.grad is not None for p in params)
    assert [n for n in nodes if _saved_arrays(n)] == []
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


def test_nodes_that_save_nothing_allow_a_second_backward():
    """As PyTorch: an add, a split (a view with several outputs) and a custom function whose ctx saved nothing
    keep only shapes, so backward can run through them again; a node that saved values still refuses."""
    class Triple(fnx.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 3.0

        @staticmethod
        def backward(ctx, g):
            return g * 3.0

    a = fnx.arange(6.0).requires_grad_()
    first, _ = (a + 1.0).split(3)
    y = Triple.apply(first)
    for _ in range(2):
        y.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [6.0, 6.0, 6.0, 0.0, 0.0, 0.0])
    z = a.exp()
    z.sum().backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        z.sum().backward()


def test_retain_graph_keeps_saved_tensors_for_a_second_backward():
    loss, params = _gpt_block_loss(np.random.default_rng(1))
    loss.backward(retain_graph=True)
    first = [p.grad.numpy().copy() for p in params]
    assert any(_saved_arrays(n) for n in _nodes(loss))
    loss.backward()
    for p, g in zip(params, first):
        np.testing.assert_allclose(p.grad.numpy(), 2 * g, rtol=1e-6)


def test_an_intermediate_whose_consumers_read_only_its_shape_is_freed():
    """sum, add, reshape and transpose need their input's shape, not its values: the forward's intermediate
    goes as soon as the user drops it, while the graph still gives the right gradient."""
    x = fnx.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    t = x * 3.0
    loss = (t.reshape(3, 2).mT + 1.0).sum()
    ref = weakref.ref(t)
    del t
    gc.collect()
    assert ref() is None
    loss.backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3), 3.0))


def test_an_output_the_vjp_reads_stays_saved():
    """exp's and div's vjps read their outputs: those stay on the tape (and their in-place change is caught)."""
    x = fnx.tensor([0.5, 1.0], requires_grad=True)
    y = x.exp()
    assert isinstance(y.grad_fn.out_value, np.ndarray)
    d = 1.0 / x
    assert isinstance(d.grad_fn.out_value, np.ndarray)
    (y + d).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp([0.5, 1.0]) - 1.0 / np.array([0.25, 1.0]), rtol=1e-6)


def test_a_stand_in_is_read_only_nan_of_the_value_shape_and_dtype():
    """What a vjp sees of a value it did not declare: NaN (0 for integers) of that shape and dtype, read-only, so
    a rule that read or wrote it would show; stand-ins are shared between nodes, and their cache stays bounded."""
    from fnx.autograd import tape

    cpu = fnx.device("cpu")
    ft = stand_in(np.ones((2, 3), np.float32), cpu)
    assert stand_in(np.zeros((2, 3), np.float32), cpu) is ft and is_stand_in(ft)
    assert not is_stand_in(fnx.zeros(2, 3)) and not ft.requires_grad and ft.grad_fn is None
    f, i = ft._value, stand_in(np.ones((4,), np.int64), cpu)._value
    assert (f.shape, f.dtype, i.shape, i.dtype) == ((2, 3), np.float32, (4,), np.int64)
    assert np.isnan(f).all() and (i == 0).all()
    assert not f.flags.writeable and not i.flags.writeable
    with pytest.raises(ValueError):
        f[0, 0] = 1.0
    for n in range(tape._MAX_STAND_INS + 10):
        assert stand_in(np.empty((n, 1), np.float32), cpu)._value.shape == (n, 1)
        assert stand_in(np.empty((n,), np.int32), cpu)._value.shape == (n,)
    assert len(tape._CPU_STAND_INS[np.dtype(np.float32)]) <= tape._MAX_STAND_INS
    assert len(tape._STAND_INS) <= tape._MAX_STAND_INS


def test_each_saved_stand_in_has_its_own_values_shape_and_dtype():
    """A node's stand-ins follow each input's and the output's own shape and dtype (broadcast operands, an integer
    index, a bool mask, a real input of a complex output), whatever stand-ins other dtypes have cached; an integer
    output gets no node, even once integer stand-ins exist."""
    x_leaf = fnx.tensor(np.ones((2, 3), np.float32), requires_grad=True)
    row_leaf = fnx.tensor(np.ones(3, np.float32), requires_grad=True)
    x, row = x_leaf * 1.0, row_leaf * 1.0   # intermediates: a leaf input would be kept as it is
    cases = [(x + row, [((2, 3), np.float32), ((3,), np.float32)], ((2, 3), np.float32)),
             (x.double() - 1.0, [((2, 3), np.float64), ((), np.float64)], ((2, 3), np.float64)),
             (x.sum(0), [((2, 3), np.float32)], ((3,), np.float32)),
             (fnx.complex(x, x * 2.0), [((2, 3), np.float32), ((2, 3), np.float32)], ((2, 3), np.complex64))]
    for y, ins, out in cases:
        node = y.grad_fn
        seen = [(a._value.shape, a._value.dtype) for a in node.inputs]
        assert seen == [(s, np.dtype(d)) for s, d in ins], node.name
        if node.out_value is None:   # add's and sub's rules read nothing of their output
            assert node.prim.vjp_ignores_out and node.prim.name in ("add", "sub")
        elif not isinstance(node.out_value, np.ndarray):
            assert (node.out_value._value.shape, node.out_value._value.dtype) == (out[0], np.dtype(out[1]))
    stand_in(np.zeros((2, 3), np.int64), fnx.device("cpu"))
    assert (x.long() + fnx.tensor(np.ones((2, 3), np.int64))).grad_fn is None
    (x + row).sum().backward()
    np.testing.assert_array_equal(row_leaf.grad.numpy(), [2.0, 2.0, 2.0])


@pytest.mark.parametrize("compiled", [False, True])
def test_a_training_step_leaves_no_reference_cycles(compiled):
    """A step's graph (a compiled call's residuals included) is freed by reference counting as soon as backward
    has run, not by Python's cycle collector, which may run much later (or never, with gc disabled)."""
    fnx.manual_seed(0)
    model = fnx.nn.Sequential(fnx.nn.Linear(8, 16), fnx.nn.GELU(), fnx.nn.Linear(16, 4))
    net = fnx.compile(model) if compiled else model
    opt = fnx.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = fnx.randn(32, 8), fnx.randint(0, 4, (32,))

    def step():
        opt.zero_grad()
        F.cross_entropy(net(x), y).backward()
        opt.step()

    step()
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        step()
        gc.collect()
        cyclic = [type(o).__name__ for o in gc.garbage]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert cyclic == []
