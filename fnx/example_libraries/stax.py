"""JAX's example neural-net library (`jax.example_libraries.stax`) over fnx tensors.

A layer is an `(init_fun, apply_fun)` pair of pure functions:

    init_fun(rng, input_shape) -> (output_shape, params)
    apply_fun(params, inputs, **kwargs) -> outputs          # rng=key for Dropout

and the combinators `serial`, `parallel` and `shape_dependent` build layers from layers. Arrays are laid out as
in JAX: `Conv` takes NHWC inputs and HWIO kernels, `Dense` kernels are (in, out), pools default to NHWC.
As JAX's stax, the layers are written with fnx.numpy, fnx.lax (`conv_general_dilated`, `reduce_window`) and
fnx.nn's jax.nn functions, so inputs may be numpy arrays and mixed dtypes promote as in JAX; initializers
are fnx.nn.initializers' (JAX's distributions; fnx's random streams).
"""
from __future__ import annotations

import math
from typing import Callable

from .. import lax, random
from .. import numpy as jnp
from ..errors import FnxValueError
from ..nn.initializers import glorot_normal, normal, ones, zeros
from ..nn.jax_functions import elu, gelu, leaky_relu, log_softmax, relu, selu, sigmoid, softmax, softplus, standardize

__all__ = ["Dense", "GeneralConv", "Conv", "GeneralConvTranspose", "Conv1DTranspose", "ConvTranspose", "BatchNorm",
           "elementwise", "Tanh", "Relu", "Exp", "LogSoftmax", "Softmax", "Softplus", "Sigmoid", "Elu", "LeakyRelu",
           "Selu", "Gelu", "MaxPool", "SumPool", "AvgPool", "Flatten", "Identity", "FanOut", "FanInSum",
           "FanInConcat", "Dropout", "serial", "parallel", "shape_dependent", "glorot", "randn", "glorot_normal",
           "normal", "ones", "zeros"]

glorot, randn = glorot_normal, normal  # JAX's old names, still used by published code


def Dense(out_dim: int, W_init=glorot_normal(), b_init=normal()) -> tuple[Callable, Callable]:
    """A fully connected layer: inputs @ W + b, W of shape (in, out)."""
    def init_fun(rng, input_shape):
        k1, k2 = random.split(rng)
        return tuple(input_shape[:-1]) + (out_dim,), (W_init(k1, (input_shape[-1], out_dim)), b_init(k2, (out_dim,)))

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        return jnp.dot(inputs, W) + b
    return init_fun, apply_fun


def _pads(padding, sizes, windows, strides) -> list[tuple[int, int]]:
    """(low, high) padding per spatial dim: JAX's 'VALID' / 'SAME' / 'SAME_LOWER', or explicit pairs."""
    if isinstance(padding, str):
        return lax.padtype_to_pads(sizes, windows, strides, padding)
    return [tuple(p) for p in padding]


def _out_size(n: int, window: int, stride: int, pad: tuple[int, int]) -> int:
    return (n + pad[0] + pad[1] - window) // stride + 1


def _transposed_out_size(n: int, window: int, stride: int, padding) -> int:
    """The length of lax.conv_transpose's output: n * stride for 'SAME', plus the kernel's overhang for
    'VALID'; with explicit pads, the dilated input padded and convolved."""
    if isinstance(padding, str):
        return n * stride + (max(window - stride, 0) if padding.upper() == "VALID" else 0)
    return (n - 1) * stride + padding[0] + padding[1] - window + 2


def _conv_layer(name: str, dimension_numbers, out_chan: int, filter_shape, strides, padding, W_init, b_init,
                transposed: bool) -> tuple[Callable, Callable]:
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    spatial = [c for c in rhs_spec if c not in "OI"]
    if sorted(spatial) != sorted(c for c in lhs_spec if c not in "NC") or sorted(lhs_spec) != sorted(out_spec):
        raise FnxValueError(f"{name}: dimension_numbers {dimension_numbers} must name the same spatial dims in the "
                            f"input, kernel and output specs")
    one = (1,) * len(filter_shape)
    strides = tuple(strides or one)
    W_init = W_init or glorot_normal(rhs_spec.index("I"), rhs_spec.index("O"))

    def init_fun(rng, input_shape):
        sizes = dict(zip(lhs_spec, input_shape))
        filters = iter(filter_shape)
        kernel_shape = [out_chan if c == "O" else sizes["C"] if c == "I" else next(filters) for c in rhs_spec]
        out = {"N": sizes["N"], "C": out_chan}
        if transposed:
            pads = [padding] * len(spatial) if isinstance(padding, str) else [tuple(p) for p in padding]
            sizer = _transposed_out_size
        else:
            pads, sizer = _pads(padding, [sizes[c] for c in spatial], filter_shape, strides), _out_size
        out.update({c: sizer(sizes[c], w, s, p) for c, w, s, p in zip(spatial, filter_shape, strides, pads)})
        k1, k2 = random.split(rng)
        W, b = W_init(k1, kernel_shape), b_init(k2, [out_chan if c == "C" else 1 for c in out_spec])
        return tuple(out[c] for c in out_spec), (W, b)

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        if transposed:
            return lax.conv_transpose(inputs, W, strides, padding, dimension_numbers=dimension_numbers) + b
        return lax.conv_general_dilated(inputs, W, strides, padding, one, one,
                                        dimension_numbers=dimension_numbers) + b
    return init_fun, apply_fun


def GeneralConv(dimension_numbers, out_chan: int, filter_shape, strides=None, padding="VALID", W_init=None,
                b_init=normal(1e-6)) -> tuple[Callable, Callable]:
    """A convolution layer with JAX's layout strings, e.g. ('NHWC', 'HWIO', 'NHWC'): spatial dims are matched by
    letter, `filter_shape` and `strides` follow the kernel spec's spatial order; padding as in JAX."""
    return _conv_layer("GeneralConv", dimension_numbers, out_chan, filter_shape, strides, padding, W_init, b_init,
                       transposed=False)


def Conv(out_chan: int, filter_shape, strides=None, padding="VALID", W_init=None,
         b_init=normal(1e-6)) -> tuple[Callable, Callable]:
    """A 2-D convolution layer over NHWC inputs with an HWIO kernel (`GeneralConv` with JAX's default layout)."""
    return GeneralConv(("NHWC", "HWIO", "NHWC"), out_chan, filter_shape, strides, padding, W_init, b_init)


def GeneralConvTranspose(dimension_numbers, out_chan: int, filter_shape, strides=None, padding="VALID",
                         W_init=None, b_init=normal(1e-6)) -> tuple[Callable, Callable]:
    """A transposed-convolution layer (lax.conv_transpose: the input dilated by `strides`, then convolved),
    with layouts and arguments as GeneralConv's."""
    return _conv_layer("GeneralConvTranspose", dimension_numbers, out_chan, filter_shape, strides, padding, W_init,
                       b_init, transposed=True)


def Conv1DTranspose(out_chan: int, filter_shape, strides=None, padding="VALID", W_init=None,
                    b_init=normal(1e-6)) -> tuple[Callable, Callable]:
    """A 1-D transposed convolution over NHC inputs with an HIO kernel."""
    return GeneralConvTranspose(("NHC", "HIO", "NHC"), out_chan, filter_shape, strides, padding, W_init, b_init)


def ConvTranspose(out_chan: int, filter_shape, strides=None, padding="VALID", W_init=None,
                  b_init=normal(1e-6)) -> tuple[Callable, Callable]:
    """A 2-D transposed convolution over NHWC inputs with an HWIO kernel."""
    return GeneralConvTranspose(("NHWC", "HWIO", "NHWC"), out_chan, filter_shape, strides, padding, W_init, b_init)


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
        z = standardize(x, axis, epsilon=epsilon)
        shape = [1 if i in axis or i - x.ndim in axis else n for i, n in enumerate(x.shape)]
        if scale:
            z = gamma.reshape(shape) * z
        if center:
            z = z + beta.reshape(shape)
        return z
    return init_fun, apply_fun


def elementwise(fun: Callable, **fun_kwargs) -> tuple[Callable, Callable]:
    """A layer without parameters applying `fun(inputs, **fun_kwargs)`."""
    return (lambda rng, input_shape: (input_shape, ())), (lambda params, inputs, **kwargs: fun(inputs, **fun_kwargs))


Tanh = elementwise(jnp.tanh)
Relu = elementwise(relu)
Exp = elementwise(jnp.exp)
LogSoftmax = elementwise(log_softmax, axis=-1)
Softmax = elementwise(softmax, axis=-1)
Softplus = elementwise(softplus)
Sigmoid = elementwise(sigmoid)
Elu = elementwise(elu)
LeakyRelu = elementwise(leaky_relu)
Selu = elementwise(selu)
Gelu = elementwise(gelu)   # jax.nn.gelu: the tanh approximation


def _pooling_layer(name: str, reducer: Callable, init_val: float, average: bool, doc: str) -> Callable:
    def PoolingLayer(window_shape, strides=None, padding="VALID", spec=None) -> tuple[Callable, Callable]:
        strides = tuple(strides or (1,) * len(window_shape))

        def full_window(ndim: int) -> tuple[tuple, tuple, list]:
            """The window and strides over all dims (1 on the batch and channel dims), and the spatial dims."""
            non_spatial = (0, ndim - 1) if spec is None else (spec.index("N"), spec.index("C"))
            spatial = [i for i in range(ndim) if i not in non_spatial]
            window, stride = [1] * ndim, [1] * ndim
            for i, w, s in zip(spatial, window_shape, strides):
                window[i], stride[i] = w, s
            return tuple(window), tuple(stride), spatial

        def init_fun(rng, input_shape):
            window, stride, _ = full_window(len(input_shape))
            pads = _pads(padding, input_shape, window, stride)
            return tuple(_out_size(*dim) for dim in zip(input_shape, window, stride, pads)), ()

        def apply_fun(params, inputs, **kwargs):
            window, stride, spatial = full_window(inputs.ndim)
            out = lax.reduce_window(inputs, init_val, reducer, window, stride, padding)
            if not average:
                return out
            # each window's number of input (not padding) elements, broadcast over the batch and channel dims
            ones_ = jnp.ones([n if i in spatial else 1 for i, n in enumerate(inputs.shape)], dtype=inputs.dtype,
                             device=inputs.device)
            return out / lax.reduce_window(ones_, 0.0, lax.add, window, stride, padding)
        return init_fun, apply_fun
    PoolingLayer.__name__ = PoolingLayer.__qualname__ = name
    PoolingLayer.__doc__ = doc
    return PoolingLayer


MaxPool = _pooling_layer("MaxPool", lax.max, float("-inf"), False,
                         "A max-pooling layer: `window_shape` over the spatial dims (NHWC unless `spec` names the "
                         "layout), `strides`, padding 'VALID'/'SAME'/pairs.")
SumPool = _pooling_layer("SumPool", lax.add, 0.0, False, "A sum-pooling layer (arguments as MaxPool's).")
AvgPool = _pooling_layer("AvgPool", lax.add, 0.0, True,
                         "An average-pooling layer (arguments as MaxPool's); windows overlapping the padding "
                         "average over their input elements only.")


def _flatten():
    """A layer flattening all dims but the leading one."""
    init_fun = lambda rng, input_shape: ((input_shape[0], math.prod(input_shape[1:])), ())  # noqa: E731
    apply_fun = lambda params, inputs, **kwargs: jnp.reshape(inputs, (inputs.shape[0], -1))  # noqa: E731
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
    return init_fun, lambda params, inputs, **kwargs: jnp.concatenate(inputs, axis)


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
        return jnp.where(keep, inputs / rate, 0)
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
