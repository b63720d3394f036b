"""The op table: one `OpInfo` per public op, with hypothesis samples and a numpy reference.

Generic checks in test_ops.py run over `ALL_OPS`: values against the
reference, float64 gradients against finite differences, jvp against vjp,
double backward. A new op joins a family table (op_db_*.py) and gets every
check for free.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp


@dataclass
class Sample:
    """Positional args (numpy arrays become tensors; other values pass as they are) and keyword args."""

    args: tuple
    kwargs: dict = field(default_factory=dict)


@dataclass
class OpInfo:
    name: str
    op: Callable                      # the fnx function
    ref: Callable | None              # numpy reference on float64/int arrays (None: no value check)
    samples: st.SearchStrategy        # strategy of Sample
    dtypes: tuple = ("float32", "float64")   # dtypes for the value check (float arrays are cast)
    grad: bool = True                 # check float64 gradients against finite differences
    double_grad: bool = False         # also check second derivatives
    rtol: float = 1e-5
    atol: float = 1e-6
    grad_rtol: float = 1e-4
    grad_atol: float = 1e-6
    fd_eps: float = 1e-6
    complex: bool = False             # computes with complex values (compile runs it on its interpreter)
    # numerics: "math" or "reductions", how compiled float32 may round (test_compile.OP_CLASSES); own_eager_form:
    # eager mode computes it its own way (fnx/ops/conv.py's channels-last products), where transforms stage the
    # composite form, or the IR passes move transposes into its products (interpolate's weight matrices), so staged
    # results equal eager ones within the products' rounding, not bit for bit;
    # float32_atol: the float32 value check's absolute bound where cancellation leaves more than the default 1e-5
    extra: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        return self.name


# ---------------------------------------------------------------- strategy helpers
def shapes(min_dims: int = 0, max_dims: int = 3, min_side: int = 1, max_side: int = 4):
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)


def floats(shape, lo: float = -3.0, hi: float = 3.0, dtype=np.float64):
    return hnp.arrays(dtype, shape, elements=st.floats(lo, hi, allow_nan=False, allow_infinity=False, width=64))


def ints(shape, lo: int = 0, hi: int = 5, dtype=np.int64):
    return hnp.arrays(dtype, shape, elements=st.integers(lo, hi))


def bools(shape):
    return hnp.arrays(np.bool_, shape, elements=st.booleans())


def well_separated(a: np.ndarray, gap: float = 1e-2) -> bool:
    """True if no two values are within `gap` (keeps max/sort/abs away from kinks for finite differences)."""
    flat = np.sort(a.reshape(-1))
    return flat.size < 2 or bool(np.min(np.diff(flat)) > gap)


@st.composite
def unary_sample(draw, lo=-3.0, hi=3.0, max_dims=3, avoid=None, **kwargs):
    x = draw(floats(draw(shapes(max_dims=max_dims)), lo, hi))
    if avoid is not None:
        x = np.where(np.abs(x - avoid) < 0.05, avoid + 0.1, x)
    return Sample((x,), kwargs)


@st.composite
def binary_sample(draw, lo=-3.0, hi=3.0, lo2=None, hi2=None, scalar_rhs=False, separated=False):
    if scalar_rhs and draw(st.booleans()):
        x = draw(floats(draw(shapes()), lo, hi))
        return Sample((x, draw(st.floats(lo if lo2 is None else lo2, hi if hi2 is None else hi2))))
    s1, s2 = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=4)).input_shapes
    x = draw(floats(s1, lo, hi))
    y = draw(floats(s2, lo if lo2 is None else lo2, hi if hi2 is None else hi2))
    if separated:  # keep max/min away from ties, where finite differences are meaningless
        y = np.where(np.abs(x - y) < 0.05, y + 0.1, y)
    return Sample((x, y))


@st.composite
def reduction_sample(draw, lo=-3.0, hi=3.0, min_dims=0, dim_arg=True, keepdim_arg=True, separated=False,
                     list_dims=True):
    shape = draw(shapes(min_dims=min_dims, max_dims=3))
    x = draw(floats(shape, lo, hi))
    if separated:
        x = np.arange(x.size, dtype=np.float64).reshape(shape) * 0.37
        x = draw(st.permutations(list(x.reshape(-1)))) if x.size else x
        x = np.asarray(x, dtype=np.float64).reshape(shape)
    kwargs = {}
    if dim_arg and len(shape):
        choice = draw(st.sampled_from(["none", "int", "tuple"] if list_dims else ["none", "int"]))
        if choice == "int":
            kwargs["dim"] = draw(st.integers(-len(shape), len(shape) - 1))
        elif choice == "tuple":
            dims = draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape), unique=True))
            kwargs["dim"] = tuple(dims)
    if keepdim_arg and "dim" in kwargs:
        kwargs["keepdim"] = draw(st.booleans())
    return Sample((x,), kwargs)


def np_axis(kwargs: dict):
    """numpy's axis for a PyTorch-style dim keyword."""
    return kwargs.get("dim")


# value-dependent output shapes cannot be staged (as in JAX); in-place writes raise under every transform
DYNAMIC_SHAPE = {"nonzero", "nonzero_tuple", "masked_select", "getitem_mask", "getitem_mask_inner",
                 "repeat_interleave_tensor", "unique", "unique_dim", "unique_consecutive"}
def stageable_ops() -> list:
    """The ops that make_jaxpr/compile can trace to kernels: static output shapes (in-place writes are
    functionalized) and no complex values (the code generators have none: compile runs such a function on its
    interpreter; test_complex.py stages the complex ops, evaluates and exports them)."""
    return [op for op in all_ops() if op.name not in DYNAMIC_SHAPE and not op.complex]


def chunks(ops: list, size: int = 64) -> list[list]:
    """`ops` in runs of at most `size`, of near-equal lengths (no short last run of a few ops that a test could not
    run): tests that draw one sample of every op in one hypothesis example (one compiled program) draw a run at a
    time, since the samples of hundreds of ops exceed an example's entropy limit."""
    n = -(-len(ops) // size)
    return [ops[i * len(ops) // n:(i + 1) * len(ops) // n] for i in range(n)]


def as_tensor_function(info: OpInfo, sample: Sample):
    """(f, tensors): the op as a function of the sample's array arguments only, and those arrays as tensors."""
    import fnx

    positions = [i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray)]

    def f(*arrays):
        args = list(sample.args)
        for i, a in zip(positions, arrays):
            args[i] = a
        return info.op(*args, **sample.kwargs)

    return f, [fnx.tensor(sample.args[i]) for i in positions]


def assert_like_eager(info: OpInfo, got, expected) -> None:
    """Staged (or compiled) results against eager ones: the same shapes and dtypes, and the same bits unless the
    op has its own eager form (extra["own_eager_form"]), then within info.rtol/atol."""
    for g, e in zip(got, expected):
        assert tuple(g.shape) == tuple(e.shape) and g.dtype == e.dtype, info.name
        if info.extra.get("own_eager_form") and e.dtype.is_floating_point:
            np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=info.rtol, atol=info.atol, err_msg=info.name)
        else:
            np.testing.assert_array_equal(g.numpy(), e.numpy(), err_msg=info.name)


def all_ops() -> list:
    """Every family table, imported lazily so one broken table names itself."""
    import importlib
    import pkgutil
    import pathlib

    ops = []
    here = pathlib.Path(__file__).parent
    for info in sorted(pkgutil.iter_modules([str(here)]), key=lambda m: m.name):
        if info.name.startswith("op_db_"):
            ops.extend(importlib.import_module(info.name).OPS)
    return ops
