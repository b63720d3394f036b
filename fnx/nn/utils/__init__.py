"""`nn.utils`: gradient clipping and flattening parameters to one vector (PyTorch's semantics); `nn.utils.rnn`
packs variable-length sequences; weight and spectral normalization as forward pre-hooks (weight_norm.py,
spectral_norm.py) and as parametrizations (`nn.utils.parametrize`, `nn.utils.parametrizations`); pruning by
masks (`nn.utils.prune`); folding BatchNorm into the layer before it (`fusion`), `skip_init`, conv weight memory
formats and the deprecated `stateless.functional_call`."""
from __future__ import annotations

from typing import Iterable

import numpy as np

from ... import core
from ...autograd import no_grad
from ...core import FnxRuntimeError, FnxTypeError
from ...ops import elementwise as ew
from ...ops.creation import tensor
from ...ops.joins import cat, stack
from ...ops.norms import vector_norm
from ...tensor import Tensor
from . import fusion, init, memory_format, parametrizations, parametrize, prune, rnn, stateless
from .fusion import fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval, fuse_linear_bn_weights
from .init import skip_init
from .memory_format import convert_conv2d_weight_memory_format, convert_conv3d_weight_memory_format
from .spectral_norm import remove_spectral_norm, spectral_norm
from .weight_norm import remove_weight_norm, weight_norm

__all__ = ["rnn", "parametrize", "parametrizations", "prune", "clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_",
           "parameters_to_vector", "vector_to_parameters", "weight_norm", "remove_weight_norm", "spectral_norm",
           "remove_spectral_norm", "fusion", "init", "memory_format", "stateless", "fuse_conv_bn_eval",
           "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights", "skip_init",
           "convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format"]


def _as_list(tensors) -> list:
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


def get_total_norm(tensors: Iterable[Tensor] | Tensor, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach=None) -> Tensor:
    """The norm of the norms of `tensors` (= the norm of all their elements together)."""
    tensors = [t for t in _as_list(tensors) if t is not None]
    if not tensors:
        return tensor(0.0)
    if any(t.is_sparse for t in tensors):
        raise NotImplementedError("get_total_norm / clip_grad_norm_: sparse gradients (Embedding(sparse=True)) are "
                                  "not supported, as in PyTorch (no sparse vector_norm); clip the dense parameters "
                                  "alone, or use dense gradients")
    norm_type = float(norm_type)
    if _all_host_arrays(tensors):
        norms = [np.linalg.norm(t._value.reshape(-1), norm_type) for t in tensors]
        total = tensor(np.linalg.norm(np.asarray(norms, dtype=tensors[0]._value.dtype), norm_type))
    else:
        with no_grad():
            norms = [vector_norm(t, norm_type).to(tensors[0].device) for t in tensors]
            total = vector_norm(stack(norms), norm_type)
    if error_if_nonfinite and not bool(ew.isfinite(total)):
        raise FnxRuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so "
                              f"it cannot be clipped. To disable this error and scale the gradients by the non-finite "
                              f"norm anyway, set `error_if_nonfinite=False`")
    return total


def _all_host_arrays(tensors: list) -> bool:
    """Whether every tensor is a concrete float CPU tensor outside any transform: their norms are then computed
    by numpy directly, one call per tensor, instead of through several ops each (the same norm of norms)."""
    return not core.state.transforms_active and all(
        type(t) is Tensor and t.device.type == "cpu" and t.dtype.is_floating_point
        and t.dtype is tensors[0].dtype for t in tensors)


def clip_grads_with_norm_(parameters, max_norm: float, total_norm: Tensor, foreach=None) -> None:
    """Scale every gradient by min(1, max_norm / (total_norm + 1e-6)), in place."""
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    if not grads:
        return
    with no_grad():
        if _all_host_arrays(grads) and type(total_norm) is Tensor:
            coef = min(float(max_norm) / (float(total_norm) + 1e-6), 1.0)
            if coef < 1.0:   # multiplying by 1 changes nothing
                for g in grads:
                    g.mul_(coef)
            return
        coef = ew.clamp(float(max_norm) / (total_norm + 1e-6), max=1.0)
        for g in grads:
            g.mul_(coef.to(g.device, g.dtype))


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach=None) -> Tensor:
    """Rescale the gradients of `parameters` so that their total `norm_type` norm is at most `max_norm`;
    returns the total norm before clipping."""
    params = _as_list(parameters)
    total = get_total_norm([p.grad for p in params if p.grad is not None], norm_type, error_if_nonfinite)
    clip_grads_with_norm_(params, max_norm, total)
    return total


def clip_grad_norm(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach=None) -> Tensor:
    """Deprecated alias of clip_grad_norm_."""
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every gradient of `parameters` into [-clip_value, clip_value], in place."""
    clip_value = float(clip_value)
    with no_grad():
        for p in _as_list(parameters):
            if p.grad is not None:
                p.grad.clamp_(-clip_value, clip_value)


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """All parameters flattened and concatenated into one vector (a copy)."""
    return cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Copy consecutive slices of `vec` into `parameters` (the inverse of parameters_to_vector)."""
    if not isinstance(vec, Tensor):
        raise FnxTypeError(f"expected fnx.Tensor, but got: {type(vec).__name__}")
    offset = 0
    with no_grad():
        for p in parameters:
            n = p.numel()
            p.copy_(vec[offset:offset + n].reshape(p.shape))
            offset += n
