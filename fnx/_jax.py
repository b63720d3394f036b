"""The top-level `jax` namespace under fnx's jax alias: JAX's top-level names that fnx provides.

`jax.numpy`, `jax.lax`, `jax.random`, ... are not here: the alias maps every `jax.X` to `fnx.X`. The transforms
are fnx's, behind a thin layer that does what JAX does at a function's boundary: numpy arrays among the
arguments become tensors as `jnp.asarray` makes them (float64 and int64 narrow to float32 and int32 unless
x64 is on), Python floats given as differentiated arguments (`grad(f)(3.0)`) become float32 tensors, and `jit`
traces Python numbers passed in non-static positions (fnx.compile would bake them in as constants and compile
again for each new value, e.g. a step counter).
"""
from __future__ import annotations

import functools

import numpy as np

from ._version import __version__
from . import _jax_config as config
from .jax_api import ShapeDtypeStruct, block_until_ready, device_get, devices, eval_shape
from .jax_api import device_put as _device_put
from .numpy import asarray
from .tensor import Tensor
from .transforms import ad
from .transforms.batching import vmap as _vmap
from .transforms.compile import Compiled
from .transforms.custom import checkpoint, custom_jvp, custom_vjp, remat
from .transforms.tracing import make_jaxpr
from .tree import tree_map

__all__ = ["__version__", "config", "Array", "jit", "grad", "value_and_grad", "vmap", "jacfwd", "jacrev",
           "hessian", "jvp", "vjp", "linearize", "checkpoint", "remat", "custom_jvp", "custom_vjp", "make_jaxpr",
           "devices", "device_put", "device_get", "block_until_ready", "eval_shape", "ShapeDtypeStruct"]

Array = Tensor


def _as_tensor(leaf, scalars: bool):
    if isinstance(leaf, (np.ndarray, np.generic)) or (scalars and isinstance(leaf, (bool, int, float))):
        return asarray(leaf)
    return leaf


def _tensors(tree, scalars: bool = False):
    """`tree` with numpy arrays (and with `scalars`, Python numbers) turned into tensors."""
    return tree_map(lambda leaf: _as_tensor(leaf, scalars), tree)


class _Jitted(Compiled):
    """fnx.compile as `jax.jit`: numpy arrays and Python numbers among the non-static arguments become tensors,
    so they are traced, as JAX traces them."""

    def __call__(self, *args, **kwargs):
        n, first = len(args), int(self._module)   # a jitted Module is its own argument 0 (fnx.compile)
        args = [a if i + first in self._static_nums or i - n in self._static_nums else _tensors(a, True)
                for i, a in enumerate(args)]
        kwargs = {k: v if k in self._static_names else _tensors(v, True) for k, v in kwargs.items()}
        return super().__call__(*args, **kwargs)


def jit(fun=None, *, static_argnums=(), static_argnames=(), donate_argnums=(), backend: str | None = None):
    """`fnx.compile` with JAX's boundary: see the module docstring."""
    if fun is None:
        return functools.partial(jit, static_argnums=static_argnums, static_argnames=static_argnames,
                                 donate_argnums=donate_argnums, backend=backend)
    return _Jitted(fun, static_argnums, static_argnames, donate_argnums, backend, fullgraph=True)


def _arrays_in(fun, argnums=()):
    """`fun`, also taking numpy arrays among its arguments, and Python floats at the positions `argnums` (the
    differentiated ones: JAX traces them as float32 scalars; elsewhere it passes them through)."""
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)

    @functools.wraps(fun)
    def call(*args, **kwargs):
        n = len(args)
        args = [_tensors(a, scalars=i in nums or i - n in nums) for i, a in enumerate(args)]
        return fun(*args, **_tensors(kwargs))
    return call


def _differentiating(transform):
    """`transform(fun, argnums, ...)` whose resulting function also takes numpy arrays, and Python floats as
    differentiated arguments, as JAX's does."""
    @functools.wraps(transform)
    def jax_transform(fun, argnums=0, *t_args, **t_kwargs):
        return _arrays_in(transform(fun, argnums, *t_args, **t_kwargs), argnums)
    return jax_transform


def vmap(fun, *t_args, **t_kwargs):
    """`fnx.vmap` whose resulting function also takes numpy arrays, as JAX's does."""
    return _arrays_in(_vmap(fun, *t_args, **t_kwargs))


def device_put(x, device=None):
    """`fnx.device_put` with numpy arrays converted as `jnp.asarray` converts them (float64 to float32 unless
    x64 is on), as JAX's does."""
    return _device_put(_tensors(x), device)


grad, value_and_grad = _differentiating(ad.grad), _differentiating(ad.value_and_grad)
jacfwd, jacrev, hessian = _differentiating(ad.jacfwd), _differentiating(ad.jacrev), _differentiating(ad.hessian)


def jvp(fun, primals, tangents, has_aux: bool = False):
    """`fnx.jvp`, taking numpy arrays and Python numbers too."""
    return ad.jvp(fun, _tensors(primals, True), _tensors(tangents, True), has_aux=has_aux)


def vjp(fun, *primals, has_aux: bool = False):
    """`fnx.vjp`, taking numpy arrays and Python numbers too (the primals, and the cotangents of the pullback it
    returns)."""
    out, pullback, *aux = ad.vjp(fun, *_tensors(primals, True), has_aux=has_aux)
    return (out, _arrays_in(pullback), *aux)


def linearize(fun, *primals):
    """`fnx.linearize`, taking numpy arrays and Python numbers too (the primals, and the tangents of the map it
    returns)."""
    out, f_jvp = ad.linearize(fun, *_tensors(primals, True))
    return out, _arrays_in(f_jvp)
