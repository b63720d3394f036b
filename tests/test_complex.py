"""Complex tensors: dtypes and promotion, printing, errors, PyTorch's gradient convention, gradcheck, the
rotary-embedding pattern, compile, staging and export. The ops' values, gradients and batching are checked
by the generic op-table tests (op_db_complex.py)."""
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fnx
from fnx.autograd import GradcheckError, gradcheck
from fnx.export.specialize import specialize
from fnx.ir import eval_jaxpr
from op_db import as_tensor_function
from op_db_complex import OPS as COMPLEX_OPS
from op_db_fft import OPS as FFT_OPS

OPS = COMPLEX_OPS + [op for op in FFT_OPS if op.complex]


@pytest.mark.parametrize("a, b, expected", [
    (fnx.float32, fnx.complex64, fnx.complex64), (fnx.float64, fnx.complex64, fnx.complex128),
    (fnx.int64, fnx.complex64, fnx.complex64), (fnx.bool, fnx.complex128, fnx.complex128),
    (fnx.float16, fnx.complex64, fnx.complex64), (fnx.complex64, fnx.complex128, fnx.complex128)])
def test_promotion_follows_pytorch(a, b, expected):
    assert fnx.promote_types(a, b) is expected and fnx.promote_types(b, a) is expected
    assert (fnx.ones(2, dtype=a) + fnx.ones(2, dtype=b)).dtype is expected


def test_dtype_predicates_and_python_scalars():
    z = fnx.tensor([1 + 2j])
    assert z.dtype is fnx.complex64 and z.is_complex() and fnx.is_complex(z) and not z.is_floating_point()
    assert not fnx.complex64.is_floating_point and fnx.complex128.is_complex
    assert fnx.tensor(np.array([1j], np.complex128)).dtype is fnx.complex128
    assert (fnx.ones(2, dtype=fnx.float64) * 1j).dtype is fnx.complex128
    assert (fnx.ones(2) * 1j).dtype is fnx.complex64
    assert (fnx.ones(2, dtype=fnx.int64) * 1j).dtype is fnx.complex64
    assert (fnx.ones(2, dtype=fnx.float64) + fnx.tensor(1j)).dtype is fnx.complex128   # a 0-d complex tensor
    assert (fnx.ones(2) + fnx.tensor(1j, dtype=fnx.complex128)).dtype is fnx.complex128
    assert fnx.ones(2).to(fnx.complex64).dtype is fnx.complex64
    assert fnx.finfo(fnx.complex64).eps == fnx.finfo(fnx.float32).eps


def test_repr_as_pytorch():
    assert repr(fnx.tensor([1 + 2j])) == "tensor([1.+2.j])"
    assert repr(fnx.tensor([1.5 + 2j, 3 - 1j])) == "tensor([1.5000+2.j, 3.0000-1.j])"
    assert repr(fnx.tensor([1 + 2j], dtype=fnx.complex128)) == "tensor([1.+2.j], dtype=fnx.complex128)"


def test_parts_views_and_properties():
    z = fnx.tensor([[1 + 2j, -3 + 0.5j]])
    np.testing.assert_array_equal(z.real.numpy(), [[1, -3]])
    np.testing.assert_array_equal(fnx.imag(z).numpy(), [[2, 0.5]])
    assert tuple(fnx.view_as_real(z).shape) == (1, 2, 2)
    np.testing.assert_array_equal(fnx.view_as_complex(fnx.view_as_real(z)).numpy(), z.numpy())
    np.testing.assert_allclose(fnx.polar(fnx.tensor([2.0]), fnx.tensor([math.pi / 2])).numpy(), [2j], atol=1e-6)
    np.testing.assert_array_equal(fnx.conj(z).numpy(), np.conj(z.numpy()))
    assert not z.is_conj() and z.resolve_conj() is z
    z.real = fnx.tensor([[5.0, 6.0]])
    z.imag = 0.0
    np.testing.assert_array_equal(z.numpy(), [[5, 6]])
    with pytest.raises(RuntimeError, match="imag is not implemented for tensors with non-complex dtypes"):
        fnx.ones(2).imag
    with pytest.raises(RuntimeError, match="in-place abs is not supported for complex tensors"):
        z.abs_()


def test_a_module_casts_to_complex():
    layer = fnx.nn.Linear(3, 2).to(fnx.complex64)
    assert layer.weight.dtype is fnx.complex64 and layer.weight.requires_grad
    out = layer(fnx.randn(4, 3, dtype=fnx.complex64))
    fnx.real(out * fnx.conj(out)).sum().backward()
    assert layer.weight.grad.dtype is fnx.complex64


@pytest.mark.parametrize("op", [lambda z: z < z, lambda z: fnx.maximum(z, z), fnx.relu, fnx.floor, fnx.sign,
                                lambda z: z.max(), lambda z: z.argmax(), fnx.sigmoid, fnx.round, fnx.sort,
                                lambda z: fnx.topk(z, 1), fnx.isposinf])
def test_ops_without_complex_meaning_raise_naming_the_dtype(op):
    with pytest.raises(RuntimeError, match=r"not supported for complex tensors \(fnx.complex64\)"):
        op(fnx.tensor([1 + 2j, 2 - 1j]))


def test_nan_and_inf_tests_look_at_both_parts():
    z = fnx.tensor([complex(math.inf, 0), complex(1, math.nan), 1 + 1j])
    assert fnx.isinf(z).tolist() == [True, False, False]
    assert fnx.isnan(z).tolist() == [False, True, False]
    assert fnx.isfinite(z).tolist() == [False, False, True]
    assert fnx.nan_to_num(z).numpy()[1] == 1 + 0j


def test_view_as_complex_checks_its_input():
    with pytest.raises(RuntimeError, match="last dimension of size 2"):
        fnx.view_as_complex(fnx.ones(3))
    with pytest.raises(RuntimeError, match="float32 and float64"):
        fnx.view_as_complex(fnx.ones(3, 2, dtype=fnx.int64))


def test_gradient_convention_matches_pytorch():
    """|z|^2 = z conj(z) has the gradient 2z in PyTorch; eager backward, grad and vjp agree."""
    z0 = fnx.tensor([1 + 2j, 3 - 1j], dtype=fnx.complex128)
    z = z0.clone().requires_grad_()
    fnx.real(z * fnx.conj(z)).sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), 2 * z0.numpy())
    g = fnx.grad(lambda w: (w.abs() ** 2).sum())(z0)
    np.testing.assert_allclose(g.numpy(), 2 * z0.numpy())
    _, pull = fnx.vjp(lambda w: fnx.exp(w), z0)
    np.testing.assert_allclose(pull(fnx.ones_like(z0))[0].numpy(), np.conj(np.exp(z0.numpy())))


def test_forward_mode_jacobians_refuse_complex_inputs():
    z = fnx.tensor([1 + 2j, 3 - 1j])
    np.testing.assert_allclose(fnx.jacrev(fnx.abs)(z).numpy(), np.diag(z.numpy() / np.abs(z.numpy())), rtol=1e-6)
    for transform in (fnx.jacfwd, fnx.hessian):
        with pytest.raises(TypeError, match="jacfwd: complex inputs"):
            transform(lambda w: (fnx.abs(w) ** 2).sum())(z)


def test_complex_outputs_need_a_real_scalar():
    z = fnx.tensor([1 + 1j], requires_grad=True)
    with pytest.raises(RuntimeError, match="only for real scalar outputs"):
        fnx.exp(z).sum().backward()
    with pytest.raises(TypeError, match="grad requires a real scalar output"):
        fnx.grad(lambda w: fnx.exp(w).sum())(z.detach())


def test_gradcheck_perturbs_real_and_imaginary_parts():
    z = fnx.tensor([0.5 + 1j, -1 + 0.3j], dtype=fnx.complex128, requires_grad=True)
    assert gradcheck(lambda w: fnx.exp(w) * fnx.conj(w), (z,))

    class WrongConjugation(fnx.autograd.Function):
        @staticmethod
        def forward(ctx, w):
            ctx.save_for_backward(w)
            return w * w

        @staticmethod
        def backward(ctx, g):
            (w,) = ctx.saved_tensors
            return g * 2 * w   # PyTorch's rule is g * conj(2 w)

    with pytest.raises(GradcheckError, match="Jacobian mismatch"):
        gradcheck(WrongConjugation.apply, (z,))


def _rotary_reference(xq, freqs):
    """Llama's apply_rotary_emb in real arithmetic: rotate each (even, odd) pair by its angle."""
    x = xq.reshape(*xq.shape[:-1], -1, 2)
    cos, sin = fnx.cos(freqs), fnx.sin(freqs)
    even = x[..., 0] * cos - x[..., 1] * sin
    odd = x[..., 0] * sin + x[..., 1] * cos
    return fnx.stack([even, odd], -1).flatten(3)


def _rotary_complex(xq, freqs):
    freqs_cis = fnx.polar(fnx.ones_like(freqs), freqs)
    xq_ = fnx.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    return fnx.view_as_real(xq_ * freqs_cis).flatten(3)


def test_rotary_embedding_pattern_with_gradients():
    rng = np.random.default_rng(0)
    batch, seq, heads, dim = 2, 5, 3, 8
    freqs = fnx.tensor(np.outer(np.arange(seq), 1.0 / 10000 ** (np.arange(0, dim, 2) / dim)), dtype=fnx.float32)
    freqs = freqs.reshape(1, seq, 1, dim // 2)
    x = rng.standard_normal((batch, seq, heads, dim)).astype(np.float32)
    xa, xb = fnx.tensor(x, requires_grad=True), fnx.tensor(x, requires_grad=True)
    out, ref = _rotary_complex(xa, freqs), _rotary_reference(xb, freqs)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
    w = fnx.tensor(rng.standard_normal(tuple(out.shape)).astype(np.float32))
    (out * w).sum().backward()
    (ref * w).sum().backward()
    np.testing.assert_allclose(xa.grad.numpy(), xb.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_randn_complex_parts_have_variance_one_half():
    fnx.manual_seed(0)
    z = fnx.randn(20000, dtype=fnx.complex64)
    assert z.dtype is fnx.complex64
    assert abs(float(fnx.real(z).var()) - 0.5) < 0.03 and abs(float(fnx.imag(z).var()) - 0.5) < 0.03


def test_rand_complex_draws_both_parts_uniformly():
    """PyTorch's torch.rand(..., dtype=torch.cfloat): real and imaginary parts each from [0, 1)."""
    fnx.manual_seed(0)
    z = fnx.rand(4000, dtype=fnx.complex128, requires_grad=True)
    parts = fnx.view_as_real(z.detach()).numpy()
    assert z.dtype is fnx.complex128 and z.requires_grad and z.is_leaf
    assert parts.min() >= 0 and parts.max() < 1 and abs(parts.mean(0) - 0.5).max() < 0.03


def test_save_and_load(tmp_path):
    z = fnx.tensor([1 + 2j, 3 - 1j], dtype=fnx.complex128)
    fnx.save({"z": z}, tmp_path / "z.fnx")
    back = fnx.load(tmp_path / "z.fnx")["z"]
    assert back.dtype is fnx.complex128 and np.array_equal(back.numpy(), z.numpy())


@pytest.mark.parametrize("info", OPS, ids=repr)
@settings(max_examples=1)
@given(data=st.data())
def test_op_table_stages_evaluates_and_exports_exactly(info, data, tmp_path_factory):
    """The complex ops (left out of the op table's compile and export checks, which the C kernels share) staged
    and interpreted, and exported, saved, loaded and evaluated, give eager mode's values exactly."""
    op, tensors = as_tensor_function(info, data.draw(info.samples))
    want = op(*tensors)
    np.testing.assert_array_equal(fnx.compile(op, backend="interpret")(*tensors).numpy(), want.numpy())
    path = str(tmp_path_factory.mktemp("complex") / "op.fnxp")
    fnx.export(op, *tensors).save(path)
    loaded = fnx.export.load(path)
    concrete = specialize(loaded.jaxpr, {}, fnx.device("cpu"))
    np.testing.assert_array_equal(eval_jaxpr(concrete.jaxpr, concrete.consts, *tensors)[0].numpy(), want.numpy())


def test_compile_runs_complex_programs_on_the_interpreter_with_a_warning():
    def f(x):
        return fnx.view_as_real(fnx.exp(fnx.view_as_complex(x)) * 2j)

    x = fnx.randn(3, 2)
    with pytest.warns(RuntimeWarning, match="no complex arithmetic .*complex64"):
        got = fnx.compile(f, backend="c")(x)
    np.testing.assert_allclose(got.numpy(), f(x).numpy(), rtol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fnx.compile(f, backend="interpret")(x)
