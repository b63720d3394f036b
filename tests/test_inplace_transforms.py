"""In-place ops on traced tensors: functionalized under grad, jvp, vmap, compile and make_jaxpr.

Each in-place function is checked against its out-of-place twin under every transform; then views,
inputs, dtypes, nn modules, eager behaviour and the errors for what cannot be functionalized.
"""
import numpy as np
import pytest

import fnx
import fnx.nn as nn
import fnx.nn.functional as F
from fnx.ir import eval_jaxpr, verify_jaxpr


def _sum_out(f):
    return lambda x: f(x).sum()


TRANSFORMS = {
    "eager": lambda f: f,
    "grad": lambda f: fnx.grad(_sum_out(f)),
    "jvp": lambda f: lambda x: fnx.jvp(f, (x,), (fnx.ones_like(x),))[1],
    "vmap": lambda f: lambda x: fnx.vmap(f)(fnx.stack([x, 2 * x])),
    "make_jaxpr": lambda f: lambda x: _eval(fnx.make_jaxpr(f)(x), x),
    "compile": lambda f: fnx.compile(f, backend="interpret"),
    "grad_of_vmap": lambda f: fnx.grad(lambda x: fnx.vmap(f)(fnx.stack([x, x * x])).sum()),
    "vmap_of_grad": lambda f: lambda x: fnx.vmap(fnx.grad(_sum_out(f)))(fnx.stack([x, 3 * x])),
    "jvp_of_grad": lambda f: lambda x: fnx.jvp(fnx.grad(_sum_out(f)), (x,), (fnx.ones_like(x),))[1],
    "compile_of_grad": lambda f: fnx.compile(fnx.grad(_sum_out(f)), backend="interpret"),
    "grad_of_compile": lambda f: fnx.grad(_sum_out(fnx.compile(f, backend="interpret"))),
}


def _eval(closed, x):
    verify_jaxpr(closed)
    return eval_jaxpr(closed.jaxpr, closed.consts, x)[0]


# ---------------------------------------------------------------- (in-place, out-of-place) pairs
def arith_inplace(x):
    h = x * 2.0
    h += x
    h.mul_(h)
    h.clamp_(max=30.0).sub_(1.0)
    h /= 2.0
    return h


def arith_functional(x):
    h = x * 2.0 + x
    return (fnx.clamp(h * h, max=30.0) - 1.0) / 2.0


def setitem_inplace(x):
    h = x.reshape(2, 3) * 1.0
    h[0] = 5.0
    h[:, 1] += x[:2].exp()
    h[h > 6.0] = 0.0
    h[fnx.tensor([1]), fnx.tensor([2])] = x[5] * x[0]
    return h


def setitem_functional(x):
    h = x.reshape(2, 3)
    h = fnx.stack([fnx.full((3,), 5.0), h[1]])
    col = h[:, 1] + x[:2].exp()
    h = fnx.stack([h[:, 0], col, h[:, 2]], dim=1)
    h = fnx.where(h > 6.0, 0.0, h)
    last = fnx.stack([h[1, 0], h[1, 1], x[5] * x[0]])
    return fnx.stack([h[0], last])


def view_inplace(x):
    h = x.reshape(2, 3) * 1.0
    row = h[1]                  # a view that must see the writes below
    h[0].add_(x[0])             # write through a view
    h.T[1:].mul_(2.0)           # through a transposed slice
    h.view(-1)[::2].sigmoid_()  # through a strided view of a reshape
    return h * row.sum()


def view_functional(x):
    h = x.reshape(2, 3)
    h = fnx.stack([h[0] + x[0], h[1]])
    h = fnx.cat([h[:, :1], h[:, 1:] * 2.0], dim=1)
    flat = h.reshape(-1)
    flat = fnx.where(fnx.arange(6) % 2 == 0, flat.sigmoid(), flat)
    h = flat.reshape(2, 3)
    return h * h[1].sum()


def fill_copy_inplace(x):
    h = x * 1.0
    h[:2].fill_(x[3])
    h[2:4].zero_()
    h[4:].copy_(x[:2] * 3.0)
    return h.exp()


def fill_copy_functional(x):
    return fnx.cat([x[3].expand(2), fnx.zeros(2), x[:2] * 3.0]).exp()


def loop_inplace(x):
    """An RNN-like loop writing each step into a buffer made from the input."""
    buf = x.reshape(3, 2) * 0.0
    h = x[:2]
    for t in range(3):
        h = fnx.tanh(h + x[2 * t:2 * t + 2])
        buf[t] = h
    return buf


def loop_functional(x):
    h, rows = x[:2], []
    for t in range(3):
        h = fnx.tanh(h + x[2 * t:2 * t + 2])
        rows.append(h)
    return fnx.stack(rows)


PAIRS = {"arith": (arith_inplace, arith_functional), "setitem": (setitem_inplace, setitem_functional),
         "view": (view_inplace, view_functional), "fill_copy": (fill_copy_inplace, fill_copy_functional),
         "loop": (loop_inplace, loop_functional)}


@pytest.mark.parametrize("transform", list(TRANSFORMS))
@pytest.mark.parametrize("pair", list(PAIRS))
def test_inplace_matches_out_of_place(pair, transform):
    inplace, functional = PAIRS[pair]
    x = fnx.tensor([0.3, -0.5, 0.8, 1.1, -0.2, 0.6], dtype=fnx.float64)
    got = TRANSFORMS[transform](inplace)(x)
    want = TRANSFORMS[transform](functional)(x)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("pair", ["arith", "setitem", "view"])
def test_c_backend_runs_the_functionalized_program(pair):
    inplace, functional = PAIRS[pair]
    x = fnx.tensor([0.3, -0.5, 0.8, 1.1, -0.2, 0.6])
    got = fnx.compile(inplace, backend="c")(x)
    np.testing.assert_allclose(got.numpy(), functional(x).numpy(), rtol=1e-6, atol=1e-6)
    g = fnx.compile(fnx.grad(_sum_out(inplace)), backend="c")(x)
    np.testing.assert_allclose(g.numpy(), fnx.grad(_sum_out(functional))(x).numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("pair", list(PAIRS))
def test_gradients_match_finite_differences(pair):
    f = _sum_out(PAIRS[pair][0])
    x = np.array([0.3, -0.5, 0.8, 1.1, -0.2, 0.6])
    eps = 1e-6
    fd = [(f(fnx.tensor(x + eps * e)).item() - f(fnx.tensor(x - eps * e)).item()) / (2 * eps) for e in np.eye(6)]
    np.testing.assert_allclose(fnx.grad(f)(fnx.tensor(x)).numpy(), fd, rtol=1e-6, atol=1e-6)


def test_make_jaxpr_shows_only_functional_ops():
    text = str(fnx.make_jaxpr(setitem_inplace)(fnx.ones(6)))
    assert "index_put" in text and "add" in text
    text = str(fnx.make_jaxpr(view_inplace)(fnx.ones(6)))
    assert text.count("index_put") == 3


def test_vmap_value_that_becomes_unbatched_then_batched_again():
    """fill_ makes h the same for every example (unbatched); writing a batched value batches it again."""
    def f(x):
        h = x * 1.0
        h.fill_(2.0)
        h[0] = x.sum()
        h += x
        return h

    xs = fnx.tensor([[1.0, 0.0, 0.0], [0.0, 2.0, 1.0]])
    want = fnx.stack([fnx.cat([r.sum().reshape(1), fnx.full((2,), 2.0)]) + r for r in xs])
    np.testing.assert_allclose(fnx.vmap(f)(xs).numpy(), want.numpy())
    np.testing.assert_allclose(fnx.compile(fnx.vmap(f), backend="interpret")(xs).numpy(), want.numpy())


# ---------------------------------------------------------------- inputs of the transformed function
@pytest.mark.parametrize("transform", ["grad", "jvp", "vmap", "make_jaxpr"])
def test_mutating_an_input_is_local_to_the_function(transform):
    def f(x):
        x.mul_(2.0)
        x[0] = 1.0
        return x * x

    x = fnx.tensor([1.0, 2.0, 3.0], dtype=fnx.float64)
    before = x.numpy().copy()
    got = TRANSFORMS[transform](f)(x)
    np.testing.assert_array_equal(x.numpy(), before)    # the caller's tensor does not change
    want = TRANSFORMS[transform](lambda t: fnx.cat([fnx.ones(1, dtype=t.dtype), 2.0 * t[1:]]) ** 2)(x)
    np.testing.assert_allclose(got.numpy(), want.numpy())


def test_grad_of_a_mutated_input_is_the_gradient_of_the_local_value():
    def f(x):
        x += x * x           # d/dx (x + x^2)^2 summed = 2 (x + x^2)(1 + 2x)
        return (x * x).sum()

    x = fnx.tensor([0.5, -1.5])
    np.testing.assert_allclose(fnx.grad(f)(x).numpy(), (2 * (x + x * x) * (1 + 2 * x)).numpy(), rtol=1e-6)


def test_compile_refuses_to_mutate_its_input():
    def f(x):
        x.add_(1.0)
        return x

    with pytest.raises(RuntimeError, match=r"add_: in-place write into an input \(f32\[3\]\) of fnx.compile\(f\), "
                                           r"which does not write back.*return the new value"):
        fnx.compile(f)(fnx.ones(3))
    with pytest.raises(RuntimeError, match="__setitem__: in-place write into an input"):
        fnx.compile(lambda x: x.__setitem__(0, 2.0) or x)(fnx.ones(3))
    cloned = fnx.compile(lambda x: x.clone().add_(1.0))(fnx.ones(3))   # the fix the message suggests
    np.testing.assert_array_equal(cloned.numpy(), [2.0, 2.0, 2.0])


def test_compile_refuses_to_write_through_a_view_of_a_captured_tensor():
    w = fnx.ones(3)
    with pytest.raises(RuntimeError, match="add_: in-place write into a tensor captured from outside the traced "
                                           "function.*clone"):
        fnx.compile(lambda x: w[1:].add_(x) * 1.0)(fnx.ones(2))
    np.testing.assert_array_equal(w.numpy(), [1.0, 1.0, 1.0])


# ---------------------------------------------------------------- dtypes and shapes
def test_inplace_result_keeps_the_target_dtype():
    def f(x):
        h = x * 1.0                               # float32
        h.add_(fnx.tensor([1, 2, 3]))             # + int64 stays float32
        i = (x * 2.0).long()
        i.mul_(3)                                 # int64 stays int64
        h.copy_(h.double() + i)                   # copy_ casts anything
        return h

    assert fnx.make_jaxpr(f)(fnx.ones(3)).jaxpr.outvars[0].aval.dtype is fnx.float32
    assert fnx.vmap(f)(fnx.ones(2, 3)).dtype is fnx.float32
    primal, tangent = fnx.jvp(f, (fnx.ones(3),), (fnx.ones(3),))
    assert primal.dtype is tangent.dtype is fnx.float32
    np.testing.assert_array_equal(primal.numpy(), [8.0, 9.0, 10.0])


def test_inplace_errors_match_eager_ones():
    def int_target(x):
        i = (x * 2.0).long()
        i.mul_(x)
        return x

    with pytest.raises(RuntimeError, match="result type float32 can't be cast to the desired output type int64"):
        fnx.grad(lambda x: int_target(x).sum())(fnx.ones(3))

    def broadcast_target(x):
        h = x[0] * 1.0
        h.add_(x)
        return h

    with pytest.raises(RuntimeError, match=r"output with shape \[\] doesn't match the broadcast shape \[3\]"):
        fnx.compile(broadcast_target, backend="interpret")(fnx.ones(3))


# ---------------------------------------------------------------- what cannot be functionalized
def test_outer_tracer_cannot_hold_an_inner_value():
    def outer(x):
        def inner(y):
            x.add_(y)          # x: traced by the outer grad; y: by the inner vmap
            return y
        fnx.vmap(inner)(fnx.ones(2, 3))
        return x.sum()

    with pytest.raises(RuntimeError, match=r"add_: the in-place target is traced by an outer transform.*write it out "
                                           r"of place"):
        fnx.grad(outer)(fnx.ones(3))


@pytest.mark.parametrize("transform", ["grad", "jvp", "vmap"])
def test_concrete_buffer_with_a_traced_value_is_a_clear_error(transform):
    """grad, jvp and vmap create concrete tensors; the error names the out-of-place forms and compile."""
    def f(x):
        buf = fnx.zeros(3)
        buf.add_(x)
        return buf

    with pytest.raises(RuntimeError, match=r"add_: writes a traced value into a concrete tensor \(float32\[3\].*"
                                           r"index_put.*fnx.grad\(fnx.compile\(f\)\)"):
        TRANSFORMS[transform](f)(fnx.ones(3))
    np.testing.assert_array_equal(TRANSFORMS[transform](fnx.compile(f))(fnx.ones(3)).numpy(),
                                  TRANSFORMS[transform](lambda x: fnx.zeros(3) + x)(fnx.ones(3)).numpy())


def test_expanded_view_cannot_be_written():
    def f(x):
        h = x * 1.0
        h.expand(2, 3).add_(1.0)
        return h

    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor refers to a single memory"):
        fnx.grad(lambda x: f(x).sum())(fnx.ones(3))


# ---------------------------------------------------------------- nn modules
class _Block(nn.Module):
    def __init__(self, inplace: bool):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 4), nn.Linear(4, 4)
        self.act = nn.ReLU(inplace=inplace)
        self.inplace = inplace

    def forward(self, x):
        out = self.act(self.fc1(x))
        out = self.fc2(out)
        if self.inplace:
            out += x
            out.relu_()
            return out
        return F.relu(out + x)


def test_module_with_inplace_ops_under_grad_and_compile():
    fnx.manual_seed(0)
    block = _Block(inplace=True)
    twin = _Block(inplace=False)
    twin.load_state_dict(block.state_dict())
    x = fnx.randn(5, 4)
    params = dict(block.named_parameters())

    def loss(m):
        return lambda p, x: nn.functional_call(m, p, (x,)).square().sum()

    g = fnx.grad(loss(block))(params, x)
    want = fnx.grad(loss(twin))(params, x)
    for k in params:
        np.testing.assert_allclose(g[k].detach().numpy(), want[k].detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(fnx.compile(block)(x).detach().numpy(), twin(x).detach().numpy(), rtol=1e-6)
    compiled = fnx.compile(fnx.grad(loss(block)), backend="c")(params, x)
    np.testing.assert_allclose(compiled["fc1.weight"].detach().numpy(), want["fc1.weight"].detach().numpy(), rtol=1e-5)


# ---------------------------------------------------------------- eager behaviour is unchanged
def test_eager_inplace_still_writes_memory_and_checks_versions():
    base = fnx.ones(3)
    base[1:].add_(1.0)
    base.T.mul_(2.0)
    np.testing.assert_array_equal(base.numpy(), [2.0, 4.0, 4.0])
    a = fnx.ones(3, requires_grad=True)
    b = a * 2
    c = b * b
    b.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        c.sum().backward()
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        a.add_(1.0)


# ---------------------------------------------------------------- buffers created inside compile and make_jaxpr
def buffer_inplace(x):
    """A buffer made inside the function, written with traced values."""
    buf = fnx.zeros(4, dtype=x.dtype)
    buf[1] = x.sum()
    buf += x
    buf[2:].mul_(x[:2])
    return buf


def buffer_functional(x):
    buf = fnx.stack([x[0], x.sum() + x[1], x[2], x[3]])
    return fnx.cat([buf[:2], buf[2:] * x[:2]])


def rows_inplace(x):
    """`for i in range(n): out[i] = f(x[i])` into an uninitialised buffer."""
    out = fnx.empty(x.shape[0], 2, dtype=x.dtype)
    for i in range(x.shape[0]):
        out[i] = fnx.tanh(x[i, :2]) * x[i, 2]
    return out


def rows_functional(x):
    return fnx.tanh(x[:, :2]) * x[:, 2:]


BUFFERS = {"buffer": (buffer_inplace, buffer_functional, (4,)), "rows": (rows_inplace, rows_functional, (3, 3))}
STAGED = {"make_jaxpr": TRANSFORMS["make_jaxpr"], "interpret": lambda f: fnx.compile(f, backend="interpret"),
          "c": lambda f: fnx.compile(f, backend="c")}


def _sample(shape, dtype=fnx.float64):
    return fnx.tensor(np.linspace(-0.9, 1.3, int(np.prod(shape))).reshape(shape), dtype=dtype)


@pytest.mark.parametrize("stage", list(STAGED))
@pytest.mark.parametrize("name", list(BUFFERS))
def test_created_buffer_written_in_place_is_staged(name, stage):
    inplace, functional, shape = BUFFERS[name]
    dtype = fnx.float32 if stage == "c" else fnx.float64
    x = _sample(shape, dtype)
    got = STAGED[stage](inplace)(x)
    assert got.dtype is dtype
    np.testing.assert_allclose(got.numpy(), inplace(x).numpy(), rtol=1e-6, atol=1e-7)    # eager writes memory
    np.testing.assert_allclose(got.numpy(), functional(x).numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", list(BUFFERS))
def test_grad_and_vmap_of_a_compiled_function_with_a_created_buffer(name):
    inplace, functional, shape = BUFFERS[name]
    x = _sample(shape)
    compiled = fnx.compile(inplace, backend="interpret")
    g = fnx.grad(lambda t: compiled(t).square().sum())(x)
    np.testing.assert_allclose(g.numpy(), fnx.grad(lambda t: functional(t).square().sum())(x).numpy(), rtol=1e-12)
    xs = fnx.stack([x, 2.0 * x])
    np.testing.assert_allclose(fnx.vmap(compiled)(xs).numpy(), fnx.vmap(functional)(xs).numpy(), rtol=1e-12)
    grad_c = fnx.grad(lambda t: fnx.compile(inplace, backend="c")(t).sum())(x.float())
    np.testing.assert_allclose(grad_c.numpy(), fnx.grad(lambda t: functional(t).sum())(x.float()).numpy(), rtol=1e-5)


def test_make_jaxpr_of_a_created_buffer_shows_a_constant_and_index_put():
    closed = fnx.make_jaxpr(buffer_inplace)(fnx.ones(4))
    verify_jaxpr(closed)
    text = str(closed)
    assert text.startswith("{ lambda a:f32[4]") and "index_put" in text and "mul" in text
    np.testing.assert_array_equal(closed.consts[0].numpy(), np.zeros(4))    # the buffer is a constant of the IR
    lowered = fnx.compile(buffer_inplace).lower(fnx.ones(4)).as_text()     # folding keeps the rebinding's eqns
    assert "index_put" in lowered


CREATORS = {
    "zeros": lambda: fnx.zeros(3, dtype=fnx.float64, device="cpu"),
    "ones": lambda: fnx.ones((3,), dtype=fnx.float64, device=fnx.device("cpu")),
    "full": lambda: fnx.full((3,), 2, dtype=fnx.float64, device="cpu"),
    "empty": lambda: fnx.empty(3, dtype=fnx.float64).fill_(5.0),
    "arange": lambda: fnx.arange(1, 4, dtype=fnx.float64, device="cpu"),
    "linspace": lambda: fnx.linspace(0.0, 1.0, 3, dtype=fnx.float64),
    "logspace": lambda: fnx.logspace(0.0, 1.0, 3, dtype=fnx.float64),
    "eye": lambda: fnx.eye(3, dtype=fnx.float64, device="cpu")[1],
    "zeros_like": lambda: fnx.zeros_like(fnx.ones(3), dtype=fnx.float64),
    "ones_like": lambda: fnx.ones_like(fnx.ones(3, dtype=fnx.float64)),
    "full_like": lambda: fnx.full_like(fnx.ones(3, dtype=fnx.int64), 7, dtype=fnx.float64),
    "empty_like": lambda: fnx.empty_like(fnx.ones(3, dtype=fnx.float64)).zero_(),
    "tensor": lambda: fnx.tensor([1.0, 2.0, 3.0], dtype=fnx.float64, device="cpu"),
    "as_tensor": lambda: fnx.as_tensor([1.0, 2.0, 3.0], dtype=fnx.float64),
    "from_numpy": lambda: fnx.from_numpy(np.array([4.0, 5.0, 6.0])),
}


@pytest.mark.parametrize("creator", list(CREATORS))
def test_every_creation_function_makes_a_writable_buffer_under_compile(creator):
    def f(x):
        buf = CREATORS[creator]()
        buf[1] = x[0] * x[1]
        buf[::2] += x[1:]
        return buf

    x = fnx.tensor([0.5, -2.0, 3.0], dtype=fnx.float64)
    want = f(x)
    for stage in ("make_jaxpr", "interpret"):
        got = STAGED[stage](f)(x)
        assert got.dtype is fnx.float64 and got.device == fnx.device("cpu")
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_tensor_of_python_data_under_compile():
    def f(x):
        w = fnx.tensor([1., 2.])                 # Python floats: the default float dtype
        scaled = w * x
        w[0] = x.sum()
        return scaled, w, fnx.tensor([x[0], 3.0]), fnx.tensor(x * 2.0)

    x = fnx.tensor([0.25, -1.5])
    for got, want in zip(fnx.compile(f, backend="interpret")(x), ([0.25, -3.0], [-1.25, 2.0], [0.25, 3.0],
                                                                  [0.5, -3.0])):
        assert got.dtype is fnx.float32
        np.testing.assert_allclose(got.numpy(), want)
    g = fnx.grad(lambda t: sum(o.sum() for o in fnx.compile(f, backend="interpret")(t)))(x)
    np.testing.assert_allclose(g.numpy(), [2.0, 3.0])    # tensor(traced) is a detached copy, as in PyTorch
    text = str(fnx.make_jaxpr(f)(x))
    assert "index_put" in text and "stop_gradient" in text


def test_created_values_stay_readable_in_python_until_written():
    def f(x):
        mask = fnx.tensor([True, False, True])
        assert fnx.arange(3).tolist() == [0, 1, 2] and bool(fnx.tensor(True)) and fnx.ones(2).numpy().sum() == 2
        scale = fnx.full((2,), fnx.tensor(3.0))     # full() reads its fill value
        buf = fnx.zeros(2)
        buf[0] = x[0]
        with pytest.raises(TypeError, match="item\\(\\) needs a concrete value"):
            buf.item()
        return x[mask] * scale + buf

    x = fnx.tensor([1.0, 2.0, 3.0])
    np.testing.assert_allclose(fnx.compile(f, backend="interpret")(x).numpy(), [4.0, 9.0])
    consts = fnx.make_jaxpr(f)(x).consts
    assert fnx.bool not in [c.dtype for c in consts] and len(consts) == len({id(c) for c in consts})  # read, unused


def test_buffer_created_under_compile_cannot_hold_a_value_of_a_transform_inside_it():
    def f(x):
        buf = fnx.zeros(3)
        buf[0] = x[1] * 2.0
        return buf.sum() + x.sum()

    x = fnx.tensor([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match=r"__setitem__: the in-place target is traced by an outer transform.*"
                                           r"fnx.compile\(fnx.grad\(fnx.compile\(f\)\)\)"):
        fnx.compile(fnx.grad(f))(x)
    np.testing.assert_array_equal(fnx.compile(fnx.grad(fnx.compile(f)))(x).numpy(), [1.0, 3.0, 1.0])
