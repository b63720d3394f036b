"""Eager autograd: the tape, backward, grad modes, custom Functions and debugging aids.

Attaches Tensor's autograd methods (`backward`, `retain_grad`, `register_hook`): fnx.tensor sits below
this layer.
"""
from ..tensor import Tensor
from . import tape
from .anomaly import detect_anomaly, is_anomaly_enabled, set_detect_anomaly
from .engine import backward, grad
from .function import Function, FunctionCtx
from .grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .gradcheck import GradcheckError, gradcheck

__all__ = ["backward", "grad", "Function", "FunctionCtx", "no_grad", "enable_grad", "set_grad_enabled",
           "inference_mode", "is_grad_enabled", "detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled",
           "gradcheck", "GradcheckError", "tape"]


def _tensor_backward(self, gradient=None, retain_graph=None, create_graph: bool = False, inputs=None) -> None:
    backward(self, gradient, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs)


Tensor.backward = _tensor_backward
Tensor.retain_grad = tape.retain_grad
Tensor.register_hook = tape.register_hook
