"""How far float32 results are from float64: the measurements that the numerics tests bound and that
`python -m benchmarks.numerics_report` prints (one piece of code for both).

Every float32 result is measured against the same computation in eager float64 on the same float32 values,
never against eager float32 alone: eager float32 math is numpy's, whose SIMD paths (SSE, AVX2, AVX-512,
NEON) round differently, and compiled kernels are built with `-march=native` (vector width, libmvec's
variants), so both move from CPU to CPU while their distance to float64 stays within bounds that hold on
any of them. Three measurements:

- `primitive_errors`: each float32 elementwise primitive of the codegen expression table, compiled into
  one kernel, per element in ulps from the float64 result rounded to float32 (`ulp_distance`);
- `op_table_errors`: one sample of an op-table op (tests/op_db*.py), normwise in ulps of the scale the op
  works at;
- `composite_errors`: the nn-style compositions in `COMPOSITES`, in ulps of the scale they round at
  (`scaled_ulp_error`) or as a relative error (`relative_error`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fnx
import fnx.nn.functional as F
from fnx.core import Primitive
from fnx.lowering.plan import build_executable
from op_db import OpInfo, Sample, as_tensor_function


# ---------------------------------------------------------------- measures of error
def ulp_distance(a: np.ndarray, b: np.ndarray) -> int:
    """Largest distance in units in the last place between float32 arrays (NaN and inf must coincide)."""
    assert np.array_equal(np.isnan(a), np.isnan(b)) and np.array_equal(np.isinf(a), np.isinf(b))
    keep = np.isfinite(a)
    order = lambda x: np.where(x < 0, -(x.view(np.int32) & 0x7FFFFFFF).astype(np.int64), x.view(np.int32))
    a, b = a[keep].astype(np.float32), b[keep].astype(np.float32)
    return int(np.abs(order(a) - order(b)).max()) if a.size else 0


def rounded(reference: np.ndarray) -> np.ndarray:
    """A float64 result rounded to float32: the correctly rounded float32 result, but for the float64
    function's own error (a few float64 ulps, 2^-29 float32 ulps each)."""
    with np.errstate(over="ignore"):
        return np.asarray(reference).astype(np.float32)


def scaled_ulp_error(got: np.ndarray, want: np.ndarray, scale: float | None = None) -> float:
    """Worst |got - want| in float32 ulps of `scale` (default: the largest |want|), a normwise ulp.

    The per-element `ulp_distance` is the right measure for a single primitive, not for a composition whose
    exact result cancels: where gelu's x * (1 + erf(x / sqrt 2)) or layer_norm's x - mean is near zero, the
    result keeps only the absolute accuracy of the terms that cancelled, so its per-element ulp distance is
    unbounded (over 1e9 for gelu(x < -5) vs float64, measured). Measuring every element in ulps of the largest
    value bounds the absolute error at the scale the function works at. Non-finite values must coincide.
    """
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(want)), "NaN in one result only"
    assert np.array_equal(got[np.isinf(want)], want[np.isinf(want)]), "infinities differ"
    finite = np.isfinite(want)
    got, want = got[finite], want[finite]
    if scale is None:
        scale = float(np.abs(want).max(initial=0.0))
    diff = float(np.abs(got - want).max(initial=0.0))
    return diff / float(np.spacing(np.float32(scale))) if diff else 0.0


def relative_error(got: np.ndarray, want: np.ndarray, floor: float = 0.0) -> float:
    """Normwise relative error ||got - want||_2 / max(||want||_2, floor), in float64 (0 when they are equal).

    `floor` is the norm below which a result keeps only absolute accuracy (where it is the difference of
    larger terms, as logsumexp = max + log(sum) is near 0); 0 gives the plain relative error.
    """
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    diff = float(np.linalg.norm(got - want))
    return diff / max(float(np.linalg.norm(want)), floor) if diff else 0.0


def _numpy(out) -> list[np.ndarray]:
    return [t.detach().numpy() for t in fnx.tree.tree_leaves(out)]


# ---------------------------------------------------------------- float32 elementwise primitives
PRIMS = {name: p for name, p in Primitive.registry.items() if "elementwise" in p.groups}
# Input ranges per primitive (every primitive with a float32 C expression is here).
UNARY = {"neg": (-5, 5), "exp": (-87, 88), "exp2": (-120, 120), "expm1": (-10, 10), "log": (1e-30, 1e30),
         "log2": (1e-30, 1e30), "log10": (1e-30, 1e30), "log1p": (-0.99, 100), "sqrt": (0, 1e4),
         "rsqrt": (1e-30, 1e30), "sin": (-50, 50),
         "cos": (-50, 50), "tan": (-1.5, 1.5), "tanh": (-10, 10), "sinh": (-10, 10), "cosh": (-10, 10),
         "asin": (-1, 1), "acos": (-1, 1), "atan": (-50, 50), "asinh": (-50, 50),
         "acosh": (1, 50), "atanh": (-1, 1), "sigmoid": (-20, 20), "erf": (-5, 5), "erfc": (-5, 10),
         "abs": (-5, 5), "sign": (-5, 5), "floor": (-50, 50), "ceil": (-50, 50), "round": (-50, 50),
         "trunc": (-50, 50), "isnan": (-5, 5), "not": (-1, 1), "relu": (-5, 5), "integer_pow": (-5, 5),
         "pow_scalar": (0, 5), "logit": (1e-3, 1 - 1e-3), "gelu": (-10, 10), "gelu_deriv": (-10, 10),
         "gelu_tanh": (-10, 10), "gelu_tanh_deriv": (-10, 10), "silu": (-20, 20), "lgamma": (-10, 30),
         "digamma": (-10, 30), "erfinv": (-1, 1), "clamp": (-5, 5),
         "softplus": (-30, 30), "signbit": (-5, 5), "frexp_exponent": (-1e30, 1e30)}
PARAMS = {"integer_pow": {"y": -7}, "pow_scalar": {"y": 2.5}, "clamp": {"lower": -1.0, "upper": 2.0}}   # primitives with params: the ones bound below
BINARY = {"add": (-5, 5), "sub": (-5, 5), "mul": (-5, 5), "div": (-5, 5), "pow": (0.01, 5), "max": (-5, 5),
          "min": (-5, 5), "atan2": (-5, 5), "rem": (-5, 5), "floordiv": (-5, 5), "eq": (-2, 2), "ne": (-2, 2),
          "lt": (-2, 2), "le": (-2, 2), "gt": (-2, 2), "ge": (-2, 2), "gelu_backward": (-10, 10),
          "gelu_tanh_backward": (-10, 10), "relu_backward": (-5, 5), "silu_backward": (-20, 20),
          "rsqrt_backward": (-5, 5), "fmod": (-5, 5), "tanh_backward": (-1, 1), "sigmoid_backward": (0, 1)}
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 1.0], dtype=np.float32)


def float32_inputs(rng: np.random.Generator, lo: float, hi: float, n: int = 4096) -> np.ndarray:
    """`n` uniform float32 values in [lo, hi), the first ones replaced by 0, -0, +-inf, NaN, subnormals, 1."""
    x = rng.uniform(lo, hi, n).astype(np.float32)
    x[:SPECIAL.size] = SPECIAL
    return x


@dataclass
class PrimitiveErrors:
    """One primitive over its inputs: compiled and eager float32, per element, in ulps from the float64
    result rounded to float32 (bool results: 0 if right, else the number of wrong elements), and whether
    compiled gave eager's bits."""

    compiled: int
    eager: int
    bitwise: bool


def primitive_errors(seed: int = 0) -> tuple[dict[str, PrimitiveErrors], int]:
    """Every float32 primitive of `UNARY` and `BINARY` in one compiled function, on 4096 inputs each across
    its range (plus the `SPECIAL` values): the errors per primitive and the number of kernels it compiled to.
    The kernel's loop stays scalar (rem's fmodf does not vectorise), so tanh is glibc's scalar tanhf here."""
    rng = np.random.default_rng(seed)
    names = list(UNARY) + list(BINARY)
    args = [float32_inputs(rng, *UNARY[k]) for k in UNARY]
    for k, r in BINARY.items():
        args += [float32_inputs(rng, *r), rng.uniform(*r, 4096).astype(np.float32)]

    def f(*tensors):
        it = iter(tensors)
        return ([PRIMS[k].bind(next(it), **PARAMS.get(k, {})) for k in UNARY]
                + [PRIMS[k].bind(next(it), next(it)) for k in BINARY])

    t32, t64 = [fnx.tensor(a) for a in args], [fnx.tensor(a.astype(np.float64)) for a in args]
    with np.errstate(all="ignore"):
        exe = build_executable(fnx.make_jaxpr(f)(*t32), backend="c")
        got, eager, reference = _numpy(exe(*t32)), _numpy(f(*t32)), _numpy(f(*t64))
    errors = {}
    for name, g, e, r in zip(names, got, eager, reference):
        if e.dtype == np.bool_:
            wrong = lambda a: int(np.count_nonzero(a != r))
            errors[name] = PrimitiveErrors(wrong(g), wrong(e), bool(np.array_equal(g, e)))
        else:
            errors[name] = PrimitiveErrors(ulp_distance(g, rounded(r)), ulp_distance(e, rounded(r)),
                                           g.tobytes() == e.tobytes())
    return errors, len(exe.kernels())


# ---------------------------------------------------------------- the op table in float32
def _same_values(sample: Sample) -> tuple[Sample, Sample]:
    """The sample in float32 and in float64 with the same values: float arrays rounded to float32, and Python
    floats too (float32 ops take them as float32, weakly typed), then widened back for the reference."""
    def values(dtype):
        def cast(a):
            if isinstance(a, np.ndarray) and a.dtype.kind == "f":
                return a.astype(np.float32).astype(dtype)
            return float(np.float32(a)) if type(a) is float else a
        return Sample(tuple(cast(a) for a in sample.args), {k: cast(v) for k, v in sample.kwargs.items()})

    return values(np.float32), values(np.float64)


@dataclass
class OpErrors:
    """One op-table sample in float32, compiled (C backend) and eager, against eager float64.

    `compiled` and `eager` are the worst errors over the float outputs, in float32 ulps of the scale the op
    works at (see `op_table_errors`). `bitwise`: compiled gave eager's bits for every output;
    `exact_outputs_agree`: the integer and bool outputs (indices, counts, masks) agree, which they must on
    every CPU.
    """

    compiled: float
    eager: float
    bitwise: bool
    exact_outputs_agree: bool


def op_table_errors(info: OpInfo, sample: Sample, reduction: bool = False) -> OpErrors | None:
    """`info.op` on `sample`, compiled and eager in float32 and eager in float64; None if it takes no tensors.

    Errors are normwise, in float32 ulps of the working scale: the largest finite magnitude among the float
    inputs and the float64 result. With `reduction`, also of the op on the inputs' absolute values: the
    magnitude that a sum's rounding errors scale with (sum |x| for a sum, |A| |B| for a matrix product),
    which a result that cancels to near 0 does not show.
    """
    s32, s64 = _same_values(sample)
    op32, t32 = as_tensor_function(info, s32)
    if not t32:
        return None
    op64, t64 = as_tensor_function(info, s64)
    floats = [t.dtype == fnx.float64 for t in t64]
    with np.errstate(all="ignore"):
        got, eager, reference = _numpy(fnx.compile(op32, backend="c")(*t32)), _numpy(op32(*t32)), _numpy(op64(*t64))
        magnitudes = _numpy(op64(*[t.abs() if f else t for t, f in zip(t64, floats)])) if reduction else reference
    assert len(got) == len(eager) == len(reference), info.name
    inputs = [float(np.abs(t.numpy()).max(initial=0.0)) for t, f in zip(t64, floats) if f]
    errors = OpErrors(0.0, 0.0, True, True)
    for g, e, r, m in zip(got, eager, reference, magnitudes):
        assert g.shape == e.shape and g.dtype == e.dtype, f"{info.name}: {g.dtype}{g.shape} vs eager {e.dtype}{e.shape}"
        errors.bitwise &= np.ascontiguousarray(g).tobytes() == np.ascontiguousarray(e).tobytes()
        if e.dtype != np.float32:
            errors.exact_outputs_agree &= bool(np.array_equal(g, e, equal_nan=e.dtype.kind == "f"))
            continue
        r = np.where(np.isinf(rounded(r)), rounded(r), r)   # beyond float32's range, inf is the float32 answer
        finite = lambda a: np.abs(a[np.isfinite(a)]).max(initial=0.0)
        scale = max(finite(r), finite(np.asarray(m, np.float64)), *inputs) or float(np.finfo(np.float32).tiny)
        errors.compiled = max(errors.compiled, scaled_ulp_error(g, r, scale))
        errors.eager = max(errors.eager, scaled_ulp_error(e, r, scale))
    return errors


# ---------------------------------------------------------------- composite functions: samples
SIDES = st.one_of(st.integers(1, 5), st.sampled_from([17, 64]))   # 17, 64: rows longer than a vector register


@st.composite
def float32_arrays(draw, shape, scales=(1e-3, 1.0, 10.0, 100.0, 1e4)):
    """Values in scale * [shift - 1, shift + 1], shift in {-1, 0, 1}: small to large, negative rows too."""
    scale = draw(st.sampled_from(scales))
    shift = draw(st.sampled_from([-1.0, 0.0, 1.0]))
    unit = draw(hnp.arrays(np.float32, shape, elements=st.floats(-1, 1, width=32)))
    return ((unit + np.float32(shift)) * np.float32(scale)).astype(np.float32)


@st.composite
def rows(draw):
    """One float32 array of 1-3 dims; the functions act on its last dim."""
    lead = draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=4))
    return (draw(float32_arrays(lead + (draw(SIDES),))),)


@st.composite
def layer_norm_args(draw):
    (x,) = draw(rows())
    n = x.shape[-1]
    return x, draw(float32_arrays((n,), scales=(1.0, 10.0))), draw(float32_arrays((n,), scales=(1.0, 10.0)))


@st.composite
def logits_and_targets(draw):
    (x,) = draw(rows())
    x = x.reshape(-1, x.shape[-1])
    return x, draw(hnp.arrays(np.int64, (x.shape[0],), elements=st.integers(0, x.shape[-1] - 1)))


MLP_SIZES = (4, 8, 3)


@st.composite
def mlp_args(draw):
    """Glorot-scaled weights from a drawn seed, inputs up to 10."""
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
    params = {}
    for i, (m, n) in enumerate(zip(MLP_SIZES, MLP_SIZES[1:])):
        params[f"w{i}"] = (rng.standard_normal((m, n)) / np.sqrt(m)).astype(np.float32)
        params[f"b{i}"] = rng.standard_normal(n).astype(np.float32)
    batch = draw(st.integers(1, 6))
    x = draw(float32_arrays((batch, MLP_SIZES[0]), scales=(0.1, 1.0, 10.0)))
    return params, x, rng.integers(0, MLP_SIZES[-1], batch)


# ---------------------------------------------------------------- composite functions and their scales
def _mlp(params, x):
    return F.gelu(x @ params["w0"] + params["b0"], approximate="tanh") @ params["w1"] + params["b1"]


def _mlp_loss(params, x, y):
    return F.cross_entropy(_mlp(params, x), y)


def _gelu_scale(args, want) -> float:
    """gelu(x) is x times a factor in [0, 1], rounded at the scale of x (the factor cancels for x < -3)."""
    return max(np.abs(args[0]).max(), np.abs(want).max())


def _logsumexp_scale(args, want) -> float:
    """max + log(sum(exp(x - max))) rounds at the scale of its two terms, which cancel where the result is ~0."""
    x = args[0].astype(np.float64)
    return float(np.linalg.norm(np.abs(x).max(-1) + np.log(x.shape[-1])))


def _cross_entropy_scale(args, want) -> float:
    """Cross entropy is a mean of log(sum(exp(x - max))) - (x_target - max), a log of a sum >= 1 that rounds at
    1, and its gradient is softmax - one_hot, with terms <= 1: near 0 (confident predictions) only the absolute
    error stays small, in float32 eager mode as well."""
    return 1.0


def _layer_norm_scale(args, want) -> float:
    """x - mean rounds at the scale of x, then is amplified by |w| / sqrt(var + eps): rows whose spread is far
    below their mean are ill-conditioned in any float32 layer_norm."""
    x, w, b = (a.astype(np.float64) for a in args)
    amplified = np.abs(x).max(-1) / np.sqrt(x.var(-1) + 1e-5)
    return float(amplified.max() * np.abs(w).max() + np.abs(b).max())


@dataclass(frozen=True)
class Composite:
    fn: Callable                  # tensors (float32 or float64, int targets) -> a tensor or a pytree of tensors
    samples: st.SearchStrategy    # of tuples of the arguments as numpy arrays (dicts of them for the MLP)
    metric: str                   # "ulp" (scaled_ulp_error) or "rel" (relative_error)
    scale: Callable | None = None  # (args, float64 result) -> the magnitude it rounds at (ulp's unit, rel's floor)


COMPOSITES = {
    "gelu": Composite(F.gelu, rows(), "ulp", _gelu_scale),
    "gelu_tanh": Composite(lambda x: F.gelu(x, approximate="tanh"), rows(), "ulp", _gelu_scale),
    "softmax": Composite(lambda x: F.softmax(x, -1), rows(), "ulp"),
    "log_softmax": Composite(lambda x: F.log_softmax(x, -1), rows(), "ulp"),
    "layer_norm": Composite(lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b), layer_norm_args(), "ulp",
                            _layer_norm_scale),
    "logsumexp": Composite(lambda x: fnx.logsumexp(x, -1), rows(), "rel", _logsumexp_scale),
    "cross_entropy": Composite(F.cross_entropy, logits_and_targets(), "rel", _cross_entropy_scale),
    "cross_entropy_label_smoothing": Composite(lambda x, y: F.cross_entropy(x, y, label_smoothing=0.1),
                                               logits_and_targets(), "rel", _cross_entropy_scale),
    "mlp_forward": Composite(_mlp, mlp_args().map(lambda a: a[:2]), "rel"),
    "mlp_value_and_grad": Composite(fnx.value_and_grad(_mlp_loss), mlp_args(), "rel", _cross_entropy_scale),
}


def _tensors(args, dtype):
    """The arguments as fnx tensors, float arrays cast to `dtype` (integer targets stay int64)."""
    def convert(a):
        return fnx.tensor(a.astype(dtype) if a.dtype.kind == "f" else a)

    return fnx.tree.tree_map(convert, args)


def composite_errors(name: str, args: tuple) -> tuple[float, float]:
    """(compiled vs float64, eager vs float64) for the float32 composite `name`: the worst over its outputs."""
    case = COMPOSITES[name]
    compiled_fn = fnx.compile(case.fn, backend="c")
    with np.errstate(all="ignore"):
        compiled, eager, reference = (_numpy(f(*_tensors(args, dtype))) for f, dtype in
                                      [(compiled_fn, np.float32), (case.fn, np.float32), (case.fn, np.float64)])
    assert compiled_fn.kernels(), f"{name} ran no generated kernel"
    scale = case.scale(args, reference[0]) if case.scale else None

    def error(got):
        if case.metric == "rel":
            return max(relative_error(g, w, scale or 0.0) for g, w in zip(got, reference))
        return max(scaled_ulp_error(g, w, scale) for g, w in zip(got, reference))

    return error(compiled), error(eager)
