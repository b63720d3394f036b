"""JAX's example neural-net library (`jax.example_libraries.stax`) over fnx tensors.

A layer is an `(init_fun, apply_fun)` pair of pure functions:

    init_fun(rng, input_shape) -> (output_shape, params)
    apply_fun(params, inputs, **kwargs) -> outputs          # rng=key for Dropout

and the combinators `serial`, `parallel` and `shape_dependent` build layers from layers. Arrays are laid out as
in JAX: `Conv` takes NHWC inputs and HWIO kernels, `Dense` kernels are (in, out), pools default to NHWC.
fnx's convolutions and pools work on NC... layouts, so the layers transpose around them (under `fnx.compile`
the transposes become index arithmetic). Initializers are fnx.nn.initializers' (JAX's distributions; fnx's
random streams).
"""
from __future__ import annotations

import math
from typing import Callable

from ..errors import FnxValueError
from ..nn import functional as F
from ..nn.initializers import glorot_normal, normal, ones, zeros
from ..ops import creation, joins, reduce
from ..ops import elementwise as ew
from ..ops.linalg import matmul
from .. import random

__all__ = ["Dense", "GeneralConv", "Conv", "BatchNorm", "elementwise", "Tanh", "Relu", "Exp", "LogSoftmax",
           "Softmax", "Softplus", "Sigmoid", "Elu", "LeakyRelu", "Selu", "Gelu", "MaxPool", "SumPool", "AvgPool",
           "Flatten", "Identity", "FanOut", "FanInSum", "FanInConcat", "Dropout", "serial", "parallel",
           "shape_dependent", "glorot", "randn", "glorot_normal", "normal", "ones", "zeros"]

glorot, randn = glorot_normal, normal  # JAX's old names, still used by published code


def Dense(out_dim: int, W_init=glorot_normal(), b_init=normal()) -> tuple[Callable, Callable]:
    """A fully connected layer: inputs @ W + b, W of shape (in, out)."""
    def init_fun(rng, input_shape):
        k1, k2 = random.split(rng)
        return tuple(input_shape[:-1]) + (out_dim,), (W_init(k1, (input_shape[-1], out_dim)), b_init(k2, (out_dim,)))

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        return matmul(inputs, W) + b
    return init_fun, apply_fun


def _pads(padding, sizes, windows, strides, op: str) -> list[tuple[int, int]]:
    """JAX's padding for each spatial dim: 'VALID', 'SAME', 'SAME_LOWER' or explicit (low, high) pairs."""
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            return [(0, 0)] * len(sizes)
        if mode not in ("SAME", "SAME_LOWER"):
            raise FnxValueError(f"{op}: padding must be 'VALID', 'SAME', 'SAME_LOWER' or (low, high) pairs, "
                                f"got {padding!r}")
        pads = []
        for n, w, s in zip(sizes, windows, strides):
            total = max((-(-n // s) - 1) * s + w - n, 0)
            low = total // 2 if mode == "SAME" else total - total // 2
            pads.append((low, total - low))
        return pads
    pads = [tuple(p) for p in padding]
    if len(pads) != len(sizes) or any(len(p) != 2 for p in pads):
        raise FnxValueError(f"{op}: expected {len(sizes)} (low, high) padding pairs, got {padding!r}")
    return pads


def _out_size(n: int, window: int, stride: int, pad: tuple[int, int]) -> int:
    return (n + pad[0] + pad[1] - window) // stride + 1


def _pad_spatial(x, pads, value: float = 0.0):
    """Pad the trailing (spatial) dims of an N, C, spatial... tensor by (low, high) pairs."""
    if not any(lo or hi for lo, hi in pads):
        return x
    flat = [n for lo, hi in reversed(pads) for n in (lo, hi)]
    return F.pad(x, flat, value=value)


_CONVS = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


def GeneralConv(dimension_numbers, out_chan: int, filter_shape, strides=None, padding="VALID", W_init=None,
                b_init=normal(1e-6)) -> tuple[Callable, Callable]:
    """A convolution layer with JAX's layout strings, e.g. ('NHWC', 'HWIO', 'NHWC'): spatial dims are matched by
    letter, `filter_shape` and `strides` follow the kernel spec's spatial order; padding as in JAX."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    spatial = [c for c in rhs_spec if c not in "OI"]
    if sorted(spatial) != sorted(c for c in lhs_spec if c not in "NC") or sorted(lhs_spec) != sorted(out_spec):
        raise FnxValueError(f"GeneralConv: dimension_numbers {dimension_numbers} must name the same spatial "
                            f"dims in the input, kernel and output specs")
    nd = len(spatial)
    if nd not in _CONVS or len(filter_shape) != nd:
        raise FnxValueError(f"GeneralConv: {nd} spatial dims with filter_shape {filter_shape}: fnx convolves over "
                            f"1, 2 or 3 spatial dims, and filter_shape names one size per spatial dim")
    strides = tuple(strides or (1,) * nd)
    W_init = W_init or glorot_normal(rhs_spec.index("I"), rhs_spec.index("O"))
    lhs_perm = [lhs_spec.index(c) for c in "NC" + "".join(spatial)]
    rhs_perm = [rhs_spec.index(c) for c in "OI" + "".join(spatial)]
    out_perm = [("NC" + "".join(spatial)).index(c) for c in out_spec]

    def init_fun(rng, input_shape):
        sizes = dict(zip(lhs_spec, input_shape))
        filters = iter(filter_shape)
        kernel_shape = [out_chan if c == "O" else sizes["C"] if c == "I" else next(filters) for c in rhs_spec]
        pads = _pads(padding, [sizes[c] for c in spatial], filter_shape, strides, "GeneralConv")
        out = {"N": sizes["N"], "C": out_chan}
        out.update({c: _out_size(sizes[c], w, s, p) for c, w, s, p in zip(spatial, filter_shape, strides, pads)})
        k1, k2 = random.split(rng)
        W, b = W_init(k1, kernel_shape), b_init(k2, [out_chan if c == "C" else 1 for c in out_spec])
        return tuple(out[c] for c in out_spec), (W, b)

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        x, w = inputs.permute(lhs_perm), W.permute(rhs_perm)
        x = _pad_spatial(x, _pads(padding, x.shape[2:], w.shape[2:], strides, "GeneralConv"))
        return _CONVS[nd](x, w, stride=strides).permute(out_perm) + b
    return init_fun, apply_fun


def Conv(out_chan: int, filter_shape, strides=None, padding="VALID", W_init=None,
         b_init=normal(1e-6)) -> tuple[Callable, Callable]:
    """A 2-D convolution layer over NHWC inputs with an HWIO kernel (`GeneralConv` with JAX's default layout)."""
    return GeneralConv(("NHWC", "HWIO", "NHWC"), out_chan, filter_shape, strides, padding, W_init, b_init)


def BatchNorm(axis=(0, 1, 2), epsilon: float = 1e-5, center: bool = True, scale: bool = True, beta_init=zeros,
              gamma_init=ones) -> tuple[Callable, Callable]:
    """Normalise over `axis` with the batch's own statistics (no running averages, as JAX's), then scale by
    gamma and shift by beta, which have the shape of the other dims."""
    axis = (axis,) if isinstance(axis, int) else tuple(axis)

    def init_fun(rng, input_shape):
        shape = tuple(d for i, d in enumerate(input_shape) if i not in axis)
        k1, k2 = random.split(rng)
        return tuple(input_shape), (beta_init(k1, shape) if center else (), gamma_init(k2, shape) if scale else ())

    def apply_fun(params, x, **kwargs):
        beta, gamma = params
        axes = tuple(a % x.ndim for a in axis)
        mean = reduce.mean(x, axes, keepdim=True)
        var = reduce.mean(ew.square(x), axes, keepdim=True) - ew.square(mean)
        z = (x - mean) * ew.rsqrt(var + epsilon)
        shape = [1 if i in axes else n for i, n in enumerate(x.shape)]
        if scale:
            z = gamma.reshape(shape) * z
        if center:
            z = z + beta.reshape(shape)
        return z
    return init_fun, apply_fun


def elementwise(fun: Callable, **fun_kwargs) -> tuple[Callable, Callable]:
    """A layer without parameters applying `fun(inputs, **fun_kwargs)`."""
    return (lambda rng, input_shape: (input_shape, ())), (lambda params, inputs, **kwargs: fun(inputs, **fun_kwargs))


Tanh = elementwise(ew.tanh)
Relu = elementwise(F.relu)
Exp = elementwise(ew.exp)
LogSoftmax = elementwise(F.log_softmax, dim=-1)
Softmax = elementwise(F.softmax, dim=-1)
Softplus = elementwise(F.softplus)
Sigmoid = elementwise(F.sigmoid)
Elu = elementwise(F.elu)
LeakyRelu = elementwise(F.leaky_relu)
Selu = elementwise(F.selu)
Gelu = elementwise(F.gelu, approximate="tanh")  # jax.nn.gelu's default


_MAX_POOLS = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_AVG_POOLS = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


def _pooling_layer(kind: str, doc: str) -> Callable:
    def PoolingLayer(window_shape, strides=None, padding="VALID", spec=None) -> tuple[Callable, Callable]:
        window = tuple(window_shape)
        nd = len(window)
        stride = tuple(strides or (1,) * nd)
        if nd not in _MAX_POOLS:
            raise FnxValueError(f"{kind}: fnx pools over 1, 2 or 3 spatial dims, got window {window_shape}")

        def layout(ndim: int) -> tuple[list, list]:
            """The permutation to N, C, spatial... and back."""
            n, c = (0, ndim - 1) if spec is None else (spec.index("N"), spec.index("C"))
            perm = [n, c] + [i for i in range(ndim) if i not in (n, c)]
            return perm, [perm.index(i) for i in range(ndim)]

        def init_fun(rng, input_shape):
            perm, _ = layout(len(input_shape))
            spatial = [input_shape[i] for i in perm[2:]]
            pads = _pads(padding, spatial, window, stride, kind)
            out = list(input_shape)
            for i, n, w, s, p in zip(perm[2:], spatial, window, stride, pads):
                out[i] = _out_size(n, w, s, p)
            return tuple(out), ()

        def apply_fun(params, inputs, **kwargs):
            perm, back = layout(inputs.ndim)
            x = inputs.permute(perm)
            pads = _pads(padding, x.shape[2:], window, stride, kind)
            if kind == "MaxPool":
                y = _MAX_POOLS[nd](_pad_spatial(x, pads, float("-inf")), window, stride)
            else:
                y = _AVG_POOLS[nd](_pad_spatial(x, pads), window, stride) * math.prod(window)
                if kind == "AvgPool":  # divide by the number of input (not padding) elements in each window
                    ones_ = creation.ones((1, 1) + tuple(x.shape[2:]), dtype=x.dtype, device=x.device)
                    y = y / (_AVG_POOLS[nd](_pad_spatial(ones_, pads), window, stride) * math.prod(window))
            return y.permute(back)
        return init_fun, apply_fun
    PoolingLayer.__name__ = PoolingLayer.__qualname__ = kind
    PoolingLayer.__doc__ = doc
    return PoolingLayer


MaxPool = _pooling_layer("MaxPool", "A max-pooling layer: `window_shape` over the spatial dims (NHWC unless `spec` "
                                    "names the layout), `strides`, padding 'VALID'/'SAME'/pairs.")
SumPool = _pooling_layer("SumPool", "A sum-pooling layer (arguments as MaxPool's).")
AvgPool = _pooling_layer("AvgPool", "An average-pooling layer (arguments as MaxPool's); windows overlapping the "
                                    "padding average over their input elements only.")


def _flatten():
    """A layer flattening all dims but the leading one."""
    init_fun = lambda rng, input_shape: ((input_shape[0], math.prod(input_shape[1:])), ())  # noqa: E731
    apply_fun = lambda params, inputs, **kwargs: inputs.reshape(inputs.shape[0], -1)  # noqa: E731
    return init_fun, apply_fun


def _identity():
    """A layer returning its inputs."""
    return (lambda rng, input_shape: (input_shape, ())), (lambda params, inputs, **kwargs: inputs)


def _fan_in_sum():
    """A layer summing a list of inputs."""
    return (lambda rng, input_shape: (input_shape[0], ())), (lambda params, inputs, **kwargs: sum(inputs))


Flatten, Identity, FanInSum = _flatten(), _identity(), _fan_in_sum()


def FanOut(num: int) -> tuple[Callable, Callable]:
    """A layer returning a list of `num` copies of its input (for `parallel`)."""
    return (lambda rng, input_shape: ([input_shape] * num, ())), (lambda params, inputs, **kwargs: [inputs] * num)


def FanInConcat(axis: int = -1) -> tuple[Callable, Callable]:
    """A layer concatenating a list of inputs along `axis`."""
    def init_fun(rng, input_shape):
        ax = axis % len(input_shape[0])
        size = sum(shape[ax] for shape in input_shape)
        return tuple(input_shape[0][:ax]) + (size,) + tuple(input_shape[0][ax + 1:]), ()
    return init_fun, lambda params, inputs, **kwargs: joins.cat(list(inputs), axis)


def Dropout(rate: float, mode: str = "train") -> tuple[Callable, Callable]:
    """Dropout as JAX's stax has it: `rate` is the probability of KEEPING an element (kept ones are divided by
    it); apply_fun needs `rng=key` in mode 'train' and is the identity in mode 'test'."""
    if mode not in ("train", "test"):
        raise FnxValueError(f"Dropout: mode must be 'train' or 'test', got {mode!r}")

    def apply_fun(params, inputs, **kwargs):
        if mode == "test":
            return inputs
        rng = kwargs.get("rng")
        if rng is None:
            raise FnxValueError("Dropout: apply_fun needs a PRNG key in mode 'train': call it as "
                                "apply_fun(params, inputs, rng=key), with key from fnx.random.key / split")
        keep = random.bernoulli(rng, rate, tuple(inputs.shape))
        return ew.where(keep, inputs / rate, 0.0)
    return (lambda rng, input_shape: (input_shape, ())), apply_fun


def _split_rng(rng, n: int) -> list:
    if rng is None:
        return [None] * n
    keys = random.split(rng, n)
    return [keys[i] for i in range(n)]


def serial(*layers) -> tuple[Callable, Callable]:
    """Layers one after the other; params is the list of their params, and `rng` is split among them."""
    init_funs, apply_funs = zip(*layers) if layers else ((), ())

    def init_fun(rng, input_shape):
        params = []
        for init in init_funs:
            rng, layer_rng = random.split(rng)
            input_shape, p = init(layer_rng, input_shape)
            params.append(p)
        return input_shape, params

    def apply_fun(params, inputs, **kwargs):
        rngs = _split_rng(kwargs.pop("rng", None), len(apply_funs))
        for fun, p, rng in zip(apply_funs, params, rngs):
            inputs = fun(p, inputs, rng=rng, **kwargs)
        return inputs
    return init_fun, apply_fun


def parallel(*layers) -> tuple[Callable, Callable]:
    """Layers side by side: the i-th takes the i-th of a sequence of inputs (see FanOut, FanInSum)."""
    init_funs, apply_funs = zip(*layers) if layers else ((), ())

    def init_fun(rng, input_shape):
        results = [init(r, shape) for init, r, shape in zip(init_funs, _split_rng(rng, len(init_funs)), input_shape)]
        return tuple(s for s, _ in results), tuple(p for _, p in results)

    def apply_fun(params, inputs, **kwargs):
        rngs = _split_rng(kwargs.pop("rng", None), len(apply_funs))
        return [f(p, x, rng=r, **kwargs) for f, p, x, r in zip(apply_funs, params, inputs, rngs)]
    return init_fun, apply_fun


def shape_dependent(make_layer: Callable) -> tuple[Callable, Callable]:
    """A layer built by `make_layer(input_shape)` once the input shape is known."""
    def init_fun(rng, input_shape):
        return make_layer(input_shape)[0](rng, input_shape)

    def apply_fun(params, inputs, **kwargs):
        return make_layer(tuple(inputs.shape))[1](params, inputs, **kwargs)
    return init_fun, apply_fun
