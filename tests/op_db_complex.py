"""Op table: complex ops, each seen as a real function of (real, imaginary) pairs.

A complex operand is drawn as a float array with a last dim of 2 and enters the op through
`view_as_complex`; a complex result leaves through `view_as_real`. So every generic check runs on them
unchanged: values against numpy's complex functions, float64 gradients against finite differences (which
holds the complex gradient convention to account: a wrong conjugation changes the real Jacobian), jvp
against vjp, vmap against a loop, the interpreter against eager. float32 pairs run complex64, float64
pairs complex128.
"""
import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fnx
from op_db import OpInfo, Sample, floats, shapes
from op_db_linalg import _expm_ref


def _c(a: np.ndarray) -> np.ndarray:
    """numpy's complex array of (real, imaginary) pairs."""
    return a[..., 0] + 1j * a[..., 1]


def _r(z) -> np.ndarray:
    """(real, imaginary) pairs of numpy's complex array."""
    z = np.asarray(z)
    return np.stack([z.real, z.imag], -1)


def _vc(x):
    return fnx.view_as_complex(x)


def _vr(z):
    return fnx.view_as_real(z)


@st.composite
def pairs(draw, n: int = 1, lo=-2.0, hi=2.0, re_lo=None, max_dims=2):
    """`n` complex operands of broadcastable shapes as (..., 2) float arrays; `re_lo` keeps real parts above
    it (away from the branch cut of log, sqrt and angle on the negative real axis, and from 0)."""
    if n == 1:
        shape_list = [draw(shapes(max_dims=max_dims))]
    else:
        shape_list = draw(hnp.mutually_broadcastable_shapes(num_shapes=n, max_dims=max_dims, max_side=3)).input_shapes
    arrays = []
    for s in shape_list:
        a = draw(floats(tuple(s) + (2,), lo, hi))
        if re_lo is not None:
            a[..., 0] = np.abs(a[..., 0]) + re_lo
        arrays.append(a)
    return Sample(tuple(arrays))


@st.composite
def pair_and_real(draw):
    """A complex operand and a real one of a broadcastable shape (mixed promotion)."""
    s1, s2 = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=2, max_side=3)).input_shapes
    return Sample((draw(floats(tuple(s1) + (2,), -2.0, 2.0)), draw(floats(tuple(s2), -2.0, 2.0))))


@st.composite
def reduce_pairs(draw):
    x = draw(floats(tuple(draw(shapes(min_dims=1, max_dims=2))) + (2,), -1.5, 1.5))
    x = np.where(np.abs(x) < 1e-3, 0.0, x)   # exact zeros (cumprod's rules handle them), no subnormals
    dim = draw(st.integers(0, x.ndim - 2))
    return Sample((x,), {"dim": dim})


@st.composite
def matmul_pairs(draw):
    n, k, m = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    return Sample((draw(floats((n, k, 2), -1.5, 1.5)), draw(floats((k, m, 2), -1.5, 1.5))))


@st.composite
def square_pairs(draw):
    n = draw(st.integers(1, 3))
    return Sample((draw(floats((n, n, 2), -1.5, 1.5)),))


@st.composite
def eig_sample(draw, complex_input: bool):
    """Square matrices (complex as pairs) whose eigenvalues are at least 0.1 apart (a spread diagonal is added
    where they are not), so that eig is differentiable and finite differences keep LAPACK's order."""
    n = draw(st.integers(1, 3))
    a = draw(floats((n, n, 2) if complex_input else (n, n), -2.0, 2.0))
    a = np.where(np.abs(a) < 1e-6, 0.0, a)   # no subnormal entries: their eigenvector parts underflow in the rules
    w = np.linalg.eigvals(_c(a) if complex_input else a)
    if (np.abs(w[:, None] - w[None, :]) + 10 * np.eye(n)).min() < 0.1:
        real_part = a[..., 0] if complex_input else a
        real_part += np.diag(np.arange(n) * 0.7)
    return Sample((a,))


def _eig_invariants(lib_eig, to_parts, vabs):
    """A function of eig that depends neither on the eigenvectors' phases nor on the order: the second power sum
    of the eigenvalues plus sum_j |V_ij|^2 L_j, as (real, imaginary) pairs."""
    def f(a):
        L, V = lib_eig(a)
        return to_parts((L ** 2).sum() + ((vabs(V) ** 2) * L[None, :]).sum(-1))
    return f


@st.composite
def reals(draw, n: int = 2, lo=-2.0, hi=2.0):
    s = draw(shapes(max_dims=2))
    return Sample(tuple(draw(floats(tuple(s), lo, hi)) for _ in range(n)))


def _op(name, fn, ref, samples):
    return OpInfo(f"complex_{name}", fn, ref, samples, complex=True)


def _unary(name, fn, ref, samples=pairs()):
    return _op(name, lambda x: _vr(fn(_vc(x))), lambda x: _r(ref(_c(x))), samples)


def _binary(name, fn, ref, samples=pairs(2)):
    return _op(name, lambda x, y: _vr(fn(_vc(x), _vc(y))), lambda x, y: _r(ref(_c(x), _c(y))), samples)


def _to_real(name, fn, ref, samples=pairs()):
    """An op from complex to real values."""
    return _op(name, lambda x: fn(_vc(x)), lambda x: ref(_c(x)), samples)


OPS = [
    _unary("neg", fnx.neg, np.negative),
    _unary("conj", fnx.conj, np.conj),
    _unary("exp", fnx.exp, np.exp),
    _unary("log", fnx.log, np.log, samples=pairs(re_lo=0.3)),
    _unary("sqrt", fnx.sqrt, np.sqrt, samples=pairs(re_lo=0.3)),
    _unary("sin", fnx.sin, np.sin),
    _unary("cos", fnx.cos, np.cos),
    _unary("tanh", fnx.tanh, np.tanh, samples=pairs(lo=-1.0, hi=1.0)),
    _unary("reciprocal", fnx.reciprocal, np.reciprocal, samples=pairs(re_lo=0.3)),
    _unary("square", lambda z: z ** 2, np.square),
    _unary("pow_scalar", lambda z: z ** 1.5, lambda z: z ** 1.5, samples=pairs(re_lo=0.3)),
    _unary("mul_imaginary_unit", lambda z: z * 2j, lambda z: z * 2j),
    _unary("sgn", fnx.sgn, lambda z: z / np.abs(z), samples=pairs(re_lo=0.3)),
    _binary("add", fnx.add, np.add),
    _binary("sub", fnx.sub, np.subtract),
    _binary("mul", fnx.mul, np.multiply),
    _binary("div", fnx.div, np.divide, samples=pairs(2, re_lo=0.3)),
    _binary("pow", fnx.pow, np.power, samples=pairs(2, lo=-1.0, hi=1.0, re_lo=0.3)),
    _binary("matmul", fnx.matmul, np.matmul, samples=matmul_pairs()),
    _binary("einsum", lambda a, b: fnx.einsum("ij,jk->ik", a, b), lambda a, b: np.einsum("ij,jk->ik", a, b),
            samples=matmul_pairs()),
    _op("mul_real", lambda x, y: _vr(_vc(x) * y), lambda x, y: _r(_c(x) * y), pair_and_real()),
    _to_real("abs", fnx.abs, np.abs, samples=pairs(re_lo=0.3)),
    _to_real("angle", fnx.angle, np.angle, samples=pairs(re_lo=0.3)),
    _to_real("real", fnx.real, np.real),
    _to_real("imag", fnx.imag, np.imag),
    _to_real("abs_squared", lambda z: fnx.real(z * fnx.conj(z)), lambda z: np.abs(z) ** 2),
    _op("sum", lambda x, dim: _vr(fnx.sum(_vc(x), dim)), lambda x, dim: _r(np.sum(_c(x), dim)),
        reduce_pairs()),
    _op("mean", lambda x, dim: _vr(fnx.mean(_vc(x), dim)), lambda x, dim: _r(np.mean(_c(x), dim)),
        reduce_pairs()),
    _op("prod", lambda x, dim: _vr(fnx.prod(_vc(x), dim)), lambda x, dim: _r(np.prod(_c(x), dim)),
        reduce_pairs()),
    _op("cumsum", lambda x, dim: _vr(fnx.cumsum(_vc(x), dim)),
        lambda x, dim: _r(np.cumsum(_c(x), dim)), reduce_pairs()),
    _op("cumprod", lambda x, dim: _vr(fnx.cumprod(_vc(x), dim)),
        lambda x, dim: _r(np.cumprod(_c(x), dim)), reduce_pairs()),
    _op("var", lambda x, dim: fnx.var(_vc(x), dim), lambda x, dim: np.var(_c(x), dim, ddof=1),
        reduce_pairs().filter(lambda s: s.args[0].shape[s.kwargs["dim"]] > 1)),
    _op("matrix_exp", lambda x: _vr(fnx.linalg.matrix_exp(_vc(x))),
        lambda x: _r(_expm_ref(_c(x))), square_pairs()),
    _op("linalg_eig", _eig_invariants(fnx.linalg.eig, _vr, fnx.abs), _eig_invariants(np.linalg.eig, _r, np.abs),
        eig_sample(False)),
    _op("linalg_eig_complex", _eig_invariants(lambda a: fnx.linalg.eig(_vc(a)), _vr, fnx.abs),
        _eig_invariants(lambda a: np.linalg.eig(_c(a)), _r, np.abs), eig_sample(True)),
    _op("from_parts", lambda re, im: _vr(fnx.complex(re, im)), lambda re, im: _r(re + 1j * im), reals()),
    _op("polar", lambda r, theta: _vr(fnx.polar(r, theta)),
        lambda r, theta: _r(r * np.exp(1j * theta)), reals(lo=0.2, hi=2.0)),
]
