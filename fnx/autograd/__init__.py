"""Eager autograd: the tape, backward, grad modes, custom Functions and debugging aids.

Attaches Tensor's autograd methods (`backward`, `retain_grad`, `register_hook`): fnx.tensor sits below
this layer.
"""
from ..tensor import Tensor
from . import graph, tape
from .anomaly import detect_anomaly, is_anomaly_enabled, set_detect_anomaly
from .engine import backward, grad
from .function import Function, FunctionCtx
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_multithreading_enabled, is_view_replay_enabled,
                        no_grad, set_grad_enabled, set_multithreading_enabled)
from .gradcheck import GradcheckError, gradcheck, gradgradcheck, is_tensor_like
from .variable import Variable

__all__ = ["backward", "grad", "Function", "FunctionCtx", "no_grad", "enable_grad", "set_grad_enabled",
           "inference_mode", "is_grad_enabled", "detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled",
           "gradcheck", "gradgradcheck", "GradcheckError", "is_tensor_like", "tape", "graph", "Variable",
           "set_multithreading_enabled", "is_multithreading_enabled", "is_view_replay_enabled"]


def _tensor_backward(self, gradient=None, retain_graph=None, create_graph: bool = False, inputs=None) -> None:
    """Accumulate the gradient of this tensor into the `.grad` of the leaves it was computed from.

    A non-scalar tensor needs `gradient` (the vector of the vector-Jacobian product). The graph is
    freed afterwards unless `retain_graph=True`; `create_graph=True` records the backward pass too (for
    higher derivatives); `inputs` limits the accumulation to those tensors.

    >>> import fnx
    >>> x = fnx.tensor([1.0, 2.0], requires_grad=True)
    >>> (x * x).sum().backward()
    >>> x.grad
    tensor([2., 4.])
    >>> (x * 3).backward(fnx.tensor([1.0, 0.5]))   # gradients accumulate: 2x + 3 * gradient
    >>> x.grad
    tensor([5.0000, 5.5000])
    """
    backward(self, gradient, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs)


def _tensor_retain_grad(self) -> None:
    """Keep `.grad` for this non-leaf tensor after `backward()`."""
    tape.retain_grad(self)


def _tensor_register_hook(self, hook):
    """Call `hook(grad)` when this tensor's gradient is computed; a returned tensor replaces it."""
    return tape.register_hook(self, hook)


def _tensor_register_post_accumulate_grad_hook(self, hook):
    """Call `hook(tensor)` after each gradient is accumulated into this leaf's `.grad` (e.g. to step an
    optimizer on it during backward)."""
    return tape.register_post_accumulate_grad_hook(self, hook)


_tensor_backward.__name__ = _tensor_backward.__qualname__ = "backward"
_tensor_retain_grad.__name__ = _tensor_retain_grad.__qualname__ = "retain_grad"
_tensor_register_hook.__name__ = _tensor_register_hook.__qualname__ = "register_hook"
_tensor_register_post_accumulate_grad_hook.__name__ = "register_post_accumulate_grad_hook"
_tensor_register_post_accumulate_grad_hook.__qualname__ = "register_post_accumulate_grad_hook"
Tensor.backward = _tensor_backward
Tensor.retain_grad = _tensor_retain_grad
Tensor.register_hook = _tensor_register_hook
Tensor.register_post_accumulate_grad_hook = _tensor_register_post_accumulate_grad_hook
