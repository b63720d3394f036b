"""JAX's windowed lax ops: `conv_general_dilated` (and its shorthands `conv`, `conv_with_general_padding`),
`padtype_to_pads`, `conv_dimension_numbers`, and `reduce_window`.

A convolution is brought to fnx's own layout and machinery: the operands are permuted to (N, C, *spatial) and
(O, I, *spatial) as the dimension numbers say, the input is padded with `lax.pad` (interior padding is
lhs_dilation, negative padding crops), and `fnx.nn.functional.conv{1,2,3}d` does the rest (im2col and one
grouped matmul). `reduce_window` pads with the init value, takes every window with im2col and reduces the
window axis: add, max, min and mul are reductions, any other computation folds pairwise.
"""
from __future__ import annotations

import operator
from typing import Callable, NamedTuple, Sequence

from ..core import FnxValueError
from ..dtypes import as_dtype, promote_types
from ..nn.functional_conv import conv1d, conv2d, conv3d
from ..ops import elementwise as ew
from ..ops.creation import full_like
from ..ops.reduce import amax, amin, prod, sum
from ..ops.shape import flip, pad_p, permute
from ..ops.windows import im2col
from ..tensor import Tensor
from . import elementwise as lax_ew
from ._args import tensor_arg

__all__ = ["ConvDimensionNumbers", "conv_dimension_numbers", "padtype_to_pads", "conv_general_dilated",
           "conv_with_general_padding", "conv", "conv_transpose", "reduce_window"]

_CONVS = {1: conv1d, 2: conv2d, 3: conv3d}


class ConvDimensionNumbers(NamedTuple):
    """Where each logical dim sits: lhs_spec = (batch, feature, *spatial), rhs_spec = (out feature, in feature,
    *spatial), out_spec = (batch, feature, *spatial), each a tuple of array dims."""
    lhs_spec: tuple
    rhs_spec: tuple
    out_spec: tuple


def _spec_perm(spec: str, first: str, second: str, rhs_spec: str) -> tuple:
    if sorted(spec) != sorted(rhs_spec.replace("O", first).replace("I", second)) or len(set(spec)) != len(spec):
        raise FnxValueError(f"conv_dimension_numbers: the spec {spec!r} must name {first!r}, {second!r} and the "
                            f"spatial dims of the kernel spec {rhs_spec!r}, each once")
    spatial = sorted((i for i, c in enumerate(spec) if c not in (first, second)), key=lambda i: rhs_spec.index(spec[i]))
    return (spec.index(first), spec.index(second)) + tuple(spatial)


def conv_dimension_numbers(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                           dimension_numbers) -> ConvDimensionNumbers:
    """JAX's dimension numbers as a ConvDimensionNumbers: None (NCHW / OIHW / NCHW), a triple of layout strings
    such as ('NHWC', 'HWIO', 'NHWC') (spatial dims matched by letter, in the kernel spec's order), or a
    ConvDimensionNumbers."""
    n = len(lhs_shape)
    if len(rhs_shape) != n:
        raise FnxValueError(f"conv: lhs and rhs need the same rank, got shapes {list(lhs_shape)} and "
                            f"{list(rhs_shape)}")
    if dimension_numbers is None:
        return ConvDimensionNumbers(*(tuple(range(n)),) * 3)
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return dimension_numbers
    lhs, rhs, out = dimension_numbers
    if not all(isinstance(s, str) and len(s) == n for s in (lhs, rhs, out)):
        raise FnxValueError(f"conv: dimension_numbers must be three layout strings of length {n} (e.g. ('NHWC', "
                            f"'HWIO', 'NHWC')), got {dimension_numbers!r}")
    return ConvDimensionNumbers(_spec_perm(lhs, "N", "C", rhs), _spec_perm(rhs, "O", "I", rhs),
                                _spec_perm(out, "N", "C", rhs))


def padtype_to_pads(in_shape: Sequence[int], window_shape: Sequence[int], window_strides: Sequence[int],
                    padding: str) -> list[tuple[int, int]]:
    """(low, high) padding per spatial dim for 'VALID' (none), 'SAME' (the output has ceil(in / stride)
    elements, the odd extra pad element at the end) or 'SAME_LOWER' (the extra one at the start)."""
    kind = padding.upper()
    if kind == "VALID":
        return [(0, 0)] * len(in_shape)
    if kind not in ("SAME", "SAME_LOWER"):
        raise FnxValueError(f"padtype_to_pads: unknown padding {padding!r}; expected 'SAME', 'SAME_LOWER', 'VALID' "
                            f"or a sequence of (low, high) pairs")
    pads = []
    for n, k, s in zip(in_shape, window_shape, window_strides):
        total = max((-(-n // s) - 1) * s + k - n, 0)
        small, big = total // 2, total - total // 2
        pads.append((small, big) if kind == "SAME" else (big, small))
    return pads


def _pairs(op: str, padding, nd: int) -> list[tuple[int, int]]:
    pads = [tuple(int(v) for v in p) for p in padding]
    if len(pads) != nd or any(len(p) != 2 for p in pads):
        raise FnxValueError(f"{op}: padding needs one (low, high) pair per spatial dim ({nd}), got {padding!r}")
    return pads


def _per_dim(op: str, name: str, value, nd: int) -> tuple:
    if value is None:
        return (1,) * nd
    value = tuple(int(v) for v in value)
    if len(value) != nd or any(v < 1 for v in value):
        raise FnxValueError(f"{op}: {name} needs one positive int per spatial dim ({nd}), got {list(value)}")
    return value


def _inverse(perm: Sequence[int]) -> tuple:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def conv_general_dilated(lhs, rhs, window_strides: Sequence[int], padding, lhs_dilation=None, rhs_dilation=None,
                         dimension_numbers=None, feature_group_count: int = 1, batch_group_count: int = 1,
                         precision=None, preferred_element_type=None) -> Tensor:
    """The general N-d convolution (cross-correlation) of JAX (lax.conv_general_dilated), for 1 to 3 spatial dims.

    `padding` is 'SAME', 'SAME_LOWER', 'VALID' or (low, high) pairs; `lhs_dilation` inserts zeros between input
    elements (a transposed convolution), `rhs_dilation` spreads the kernel (atrous); `feature_group_count`
    groups channels. `precision` is accepted and has no effect.
    """
    x, w = tensor_arg(lhs), tensor_arg(rhs)
    dn = conv_dimension_numbers(x.shape, w.shape, dimension_numbers)
    nd = x.ndim - 2
    if nd not in _CONVS:
        raise NotImplementedError(f"conv_general_dilated: fnx convolves over 1 to 3 spatial dims, got operands of "
                                  f"rank {x.ndim}")
    if batch_group_count != 1:
        raise NotImplementedError("conv_general_dilated: batch_group_count > 1 (the weight-gradient form of a grouped "
                                  "convolution) is not supported in fnx")
    strides = _per_dim("conv_general_dilated", "window_strides", window_strides, nd)
    lhs_dil = _per_dim("conv_general_dilated", "lhs_dilation", lhs_dilation, nd)
    rhs_dil = _per_dim("conv_general_dilated", "rhs_dilation", rhs_dilation, nd)
    x, w = permute(x, dn.lhs_spec), permute(w, dn.rhs_spec)
    if x.dtype is not w.dtype:
        common = promote_types(x.dtype, w.dtype)
        x, w = x.to(common), w.to(common)
    if isinstance(padding, str):
        window = [(k - 1) * d + 1 for k, d in zip(w.shape[2:], rhs_dil)]
        pads = padtype_to_pads(x.shape[2:], window, strides, padding)
    else:
        pads = _pairs("conv_general_dilated", padding, nd)
    x = pad_p.bind(x, lo=(0, 0) + tuple(p[0] for p in pads), hi=(0, 0) + tuple(p[1] for p in pads),
                   interior=(0, 0) + tuple(d - 1 for d in lhs_dil), value=0.0 if x.dtype.is_floating_point else 0)
    y = _CONVS[nd](x, w, None, stride=strides, padding=0, dilation=rhs_dil, groups=feature_group_count)
    y = permute(y, _inverse(dn.out_spec))
    return y if preferred_element_type is None else y.to(as_dtype(preferred_element_type))


def conv_with_general_padding(lhs, rhs, window_strides: Sequence[int], padding, lhs_dilation=None,
                              rhs_dilation=None, precision=None, preferred_element_type=None) -> Tensor:
    """conv_general_dilated in the NCHW / OIHW layout (lax.conv_with_general_padding)."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                precision=precision, preferred_element_type=preferred_element_type)


def conv(lhs, rhs, window_strides: Sequence[int], padding, precision=None, preferred_element_type=None) -> Tensor:
    """conv_general_dilated in the NCHW / OIHW layout without dilation (lax.conv)."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def _transpose_pads(k: int, s: int, padding: str) -> tuple[int, int]:
    """JAX's padding of the stride-dilated input for conv_transpose: SAME gives n * s outputs, VALID
    n * s + max(k - s, 0)."""
    kind = padding.upper()
    if kind == "SAME":
        total = k + s - 2
        low = k - 1 if s > k - 1 else -(-total // 2)
    elif kind == "VALID":
        total = k + s - 2 + max(k - s, 0)
        low = k - 1
    else:
        raise FnxValueError(f"conv_transpose: padding must be 'SAME', 'VALID' or (low, high) pairs, got {padding!r}")
    return low, total - low


def conv_transpose(lhs, rhs, strides: Sequence[int], padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel: bool = False, precision=None, preferred_element_type=None) -> Tensor:
    """The transposed convolution of JAX (lax.conv_transpose): the input dilated by `strides`, then convolved.

    With transpose_kernel=True the kernel is flipped spatially and its in/out features swapped, which makes
    this the gradient of conv_general_dilated with respect to its input (PyTorch's conv_transpose).
    """
    x, w = tensor_arg(lhs), tensor_arg(rhs)
    dn = conv_dimension_numbers(x.shape, w.shape, dimension_numbers)
    nd = x.ndim - 2
    rhs_dil = _per_dim("conv_transpose", "rhs_dilation", rhs_dilation, nd)
    kernel = [(w.shape[d] - 1) * r + 1 for d, r in zip(dn.rhs_spec[2:], rhs_dil)]
    strides = _per_dim("conv_transpose", "strides", strides, nd)
    pads = ([_transpose_pads(k, s, padding) for k, s in zip(kernel, strides)] if isinstance(padding, str)
            else _pairs("conv_transpose", padding, nd))
    if transpose_kernel:
        w = flip(w, tuple(dn.rhs_spec[2:])).transpose(dn.rhs_spec[0], dn.rhs_spec[1])
    return conv_general_dilated(x, w, (1,) * nd, pads, strides, rhs_dil, dn, precision=precision,
                                preferred_element_type=preferred_element_type)


# ---------------------------------------------------------------- reduce_window
# computations reduce_window recognises: (the functions naming it, the window reduction, its identity)
_MONOIDS = (((lax_ew.add, ew.add, operator.add), sum, 0),
            ((lax_ew.max, ew.maximum), amax, float("-inf")),
            ((lax_ew.min, ew.minimum), amin, float("inf")),
            ((lax_ew.mul, ew.mul, operator.mul), prod, 1))


def _scalar(op: str, value, x: Tensor):
    """The init value as a Python scalar of `x`'s kind (it is also the padding value)."""
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise FnxValueError(f"{op}: init_value must be a scalar, got shape {list(value.shape)}")
        value = value.item()
    return float(value) if x.dtype.is_floating_point else int(value)


def reduce_window(operand, init_value, computation: Callable, window_dimensions: Sequence[int],
                  window_strides: Sequence[int], padding, base_dilation=None, window_dilation=None) -> Tensor:
    """`computation` folded over every window of `operand`, starting from `init_value` (lax.reduce_window).

    Padding ('SAME', 'VALID' or (low, high) pairs per dim) is filled with `init_value`, as in JAX. With
    lax.add / max / min / mul (or fnx's add, maximum, minimum, mul) each window is one reduction; any other
    binary `computation` is applied pairwise over the window's elements.
    """
    if isinstance(operand, (tuple, list)):
        raise NotImplementedError("reduce_window: fnx reduces one operand at a time; a tuple of operands (a variadic "
                                  "reduction) is not supported")
    x = tensor_arg(operand)
    nd = x.ndim
    kernel = _per_dim("reduce_window", "window_dimensions", window_dimensions, nd)
    strides = _per_dim("reduce_window", "window_strides", window_strides, nd)
    base = _per_dim("reduce_window", "base_dilation", base_dilation, nd)
    dilation = _per_dim("reduce_window", "window_dilation", window_dilation, nd)
    init = _scalar("reduce_window", init_value, x)
    pads = (padtype_to_pads(x.shape, kernel, strides, padding) if isinstance(padding, str)
            else _pairs("reduce_window", padding, nd))
    x = pad_p.bind(x, lo=tuple(p[0] for p in pads), hi=tuple(p[1] for p in pads),
                   interior=tuple(b - 1 for b in base), value=init)
    windows = im2col(x, kernel, strides, dilation)   # (K, *out)
    for fns, reduce, identity in _MONOIDS:
        if any(computation is f for f in fns):
            out = reduce(windows, 0).to(x.dtype)
            return out if init == identity else computation(full_like(out, init), out)
    out = full_like(windows[0], init)
    for k in range(windows.shape[0]):
        out = computation(out, windows[k])
    return out
