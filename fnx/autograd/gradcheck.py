"""`gradcheck`: compare autograd's Jacobian with central finite differences."""
from __future__ import annotations

import numpy as np

from ..core import FnxRuntimeError
from ..ops.creation import tensor
from ..tensor import Tensor
from .engine import grad
from .grad_mode import no_grad

__all__ = ["gradcheck", "GradcheckError"]


class GradcheckError(FnxRuntimeError):
    """Raised by `gradcheck` when analytical and numerical Jacobians differ beyond the tolerances."""
    pass


def _outputs(fn, inputs) -> list:
    out = fn(*inputs)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _host(t) -> np.ndarray:
    v = t._value
    return np.asarray(v.get() if hasattr(v, "get") else v, dtype=np.float64).reshape(-1)


def _analytic(out, x) -> np.ndarray:
    """d out / d x, one row per output element, by one reverse pass each."""
    jac = np.zeros((out.numel(), x.numel()))
    for j in range(out.numel()):
        onehot = np.zeros(out.numel(), dtype=out.dtype.np)
        onehot[j] = 1.0
        g = tensor(onehot.reshape(tuple(out.shape)), device=out.device)
        got = grad([out], [x], [g], retain_graph=True, allow_unused=True)[0]
        if got is not None:
            jac[j] = _host(got)
    return jac


def _numeric(fn, inputs, k: int, x, eps: float) -> np.ndarray:
    """d output_k / d x by central differences, perturbing `x`'s memory one element at a time."""
    value = x._value
    cols = []
    for m in range(x.numel()):
        idx = np.unravel_index(m, value.shape)
        orig = float(value[idx])
        with no_grad():
            value[idx] = orig + eps
            plus = _host(_outputs(fn, inputs)[k])
            value[idx] = orig - eps
            minus = _host(_outputs(fn, inputs)[k])
            value[idx] = orig
        cols.append((plus - minus) / (2 * eps))
    return np.stack(cols, axis=1) if cols else np.zeros((0, 0))


def gradcheck(fn, inputs, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True) -> bool:
    """True if every input's analytic gradient matches finite differences; inputs should be float64.

    A mismatch raises `GradcheckError` naming the output, the input and the worst element (or returns
    False with `raise_exception=False`).
    """
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    diff = [i for i, a in enumerate(inputs) if isinstance(a, Tensor) and a.requires_grad]
    if not diff:
        raise FnxRuntimeError("gradcheck: no input requires grad; call .requires_grad_() on the inputs to check")
    for i in diff:
        if inputs[i].dtype.name != "float64":
            raise FnxRuntimeError(f"gradcheck: input {i} is {inputs[i].dtype}; finite differences need float64 "
                                  f"inputs (use .double())")
    outs = _outputs(fn, inputs)
    for k, out in enumerate(outs):
        if not (isinstance(out, Tensor) and out.requires_grad):
            continue
        for i in diff:
            analytic = _analytic(out, inputs[i])
            numeric = _numeric(fn, inputs, k, inputs[i], eps)
            if np.allclose(analytic, numeric, atol=atol, rtol=rtol):
                continue
            if not raise_exception:
                return False
            worst = np.unravel_index(np.argmax(np.abs(analytic - numeric)), analytic.shape)
            raise GradcheckError(
                f"gradcheck: Jacobian mismatch for output {k} with respect to input {i}: analytic "
                f"{analytic[worst]:.6g} vs numerical {numeric[worst]:.6g} at (output element {worst[0]}, input "
                f"element {worst[1]}).\nnumerical:\n{numeric}\nanalytic:\n{analytic}")
    return True
