"""PyTorch's top-level in-place functions, `torch.X_(tensor, ...)`: the Tensor in-place methods as functions.

`fnx.exp_(x)` is `x.exp_()`: the same wrapper (fnx/ops/inplace.py) around the same out-of-place op, so the same
dtype rule (the result is written in x's dtype; a result that cannot be cast to it is an error), version counter
and autograd behaviour.
"""
from __future__ import annotations

from . import complex as complex_ops, elementwise, indexing, linalg, special
from ..tensor import Tensor
from .inplace import fill_, inplace, zero_

_NAMES = ("abs_", "acos_", "acosh_", "asin_", "asinh_", "atan_", "atanh_", "arccos_", "arccosh_", "arcsin_",
          "arcsinh_", "arctan_", "arctanh_", "ceil_", "clamp_", "clamp_min_", "clamp_max_", "clip_", "cos_", "cosh_",
          "deg2rad_", "erf_", "erfc_", "exp_", "exp2_", "expm1_", "fix_", "floor_", "frac_", "ldexp_", "log_",
          "log10_", "log1p_", "log2_", "logit_", "nan_to_num_", "neg_", "negative_", "rad2deg_", "reciprocal_",
          "relu_", "round_", "rsqrt_", "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_", "square_", "tan_", "tanh_",
          "trunc_", "xlogy_", "i0_", "gcd_", "lcm_")
_OTHER_NAMES = ("addmv_", "conj_physical_", "index_put_")   # the other families' in-place functions on torch
_OUT_OF_PLACE = {**elementwise.INPLACE, **special.INPLACE, **linalg.INPLACE, **complex_ops.INPLACE, **indexing.INPLACE}

globals().update({name: inplace(_OUT_OF_PLACE[name], name) for name in _NAMES + _OTHER_NAMES})


def detach_(input: Tensor) -> Tensor:
    """`input.detach_()`: cut `input` from the autograd graph in place (a leaf that does not require grad)."""
    return input.detach_()


def resize_as_(input: Tensor, the_template: Tensor, *, memory_format=None) -> Tensor:
    """`input.resize_as_(the_template)`: give `input` the template's shape in place (`Tensor.resize_`)."""
    return input.resize_as_(the_template, memory_format)


__all__ = [*_NAMES, *_OTHER_NAMES, "fill_", "zero_", "detach_", "resize_as_"]
