"""`gradcheck`: compare autograd's Jacobian with central finite differences; `gradgradcheck` does the same
for the gradient itself (second derivatives, through `create_graph=True`).

Complex inputs and outputs count as pairs of reals, as in PyTorch's gradcheck: the real and imaginary parts
of each input are perturbed separately, and the analytic rows of an output element's real and imaginary
parts are the gradients for the cotangents 1 and i (by PyTorch's convention, a gradient dL/dx + i dL/dy).
"""
from __future__ import annotations

import numpy as np

from ..core import FnxRuntimeError
from ..ops.creation import tensor
from ..ops.sampling import rand
from ..tensor import Tensor
from .engine import grad
from .grad_mode import enable_grad, no_grad

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError", "is_tensor_like"]


def is_tensor_like(inp) -> bool:
    """Whether `inp` is a Tensor or an object that takes part in tensor operations (`__torch_function__`)."""
    return isinstance(inp, Tensor) or hasattr(inp, "__torch_function__")


class GradcheckError(FnxRuntimeError):
    """Raised by `gradcheck` when analytical and numerical Jacobians differ beyond the tolerances."""
    pass


def _outputs(fn, inputs) -> list:
    out = fn(*inputs)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _host(t) -> np.ndarray:
    """The real coordinates of `t`, flat: a complex element gives its real and imaginary parts in turn."""
    v = t._value
    v = np.asarray(v.get() if hasattr(v, "get") else v)
    if v.dtype.kind == "c":
        return v.astype(np.complex128).reshape(-1).view(np.float64)
    return v.astype(np.float64).reshape(-1)


def _size(t) -> int:
    return t.numel() * (2 if t.dtype.is_complex else 1)


def _analytic(out, x) -> np.ndarray:
    """d out / d x in real coordinates, one row per output coordinate, by one reverse pass each."""
    jac = np.zeros((_size(out), _size(x)))
    parts = 2 if out.dtype.is_complex else 1
    for j in range(_size(out)):
        onehot = np.zeros(out.numel(), dtype=out.dtype.np)
        onehot[j // parts] = 1j if j % parts else 1.0
        g = tensor(onehot.reshape(tuple(out.shape)), device=out.device)
        got = grad([out], [x], [g], retain_graph=True, allow_unused=True)[0]
        if got is not None:
            jac[j] = _host(got)
    return jac


def _numeric(fn, inputs, k: int, x, eps: float) -> np.ndarray:
    """d output_k / d x by central differences, perturbing `x`'s memory one coordinate at a time (the real and
    imaginary parts of a complex element in turn)."""
    value = x._value
    steps = (eps, eps * 1j) if x.dtype.is_complex else (eps,)
    cols = []
    for m in range(x.numel()):
        idx = np.unravel_index(m, value.shape)
        orig = value[idx].copy()
        for step in steps:
            with no_grad():
                value[idx] = orig + step
                plus = _host(_outputs(fn, inputs)[k])
                value[idx] = orig - step
                minus = _host(_outputs(fn, inputs)[k])
                value[idx] = orig
            cols.append((plus - minus) / (2 * eps))
    return np.stack(cols, axis=1) if cols else np.zeros((0, 0))


def gradcheck(fn, inputs, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True) -> bool:
    """True if every input's analytic gradient matches finite differences; inputs should be float64 or
    complex128 (complex ones as pairs of reals, see the module docstring).

    A mismatch raises `GradcheckError` naming the output, the input and the worst element (or returns
    False with `raise_exception=False`).
    """
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    diff = [i for i, a in enumerate(inputs) if isinstance(a, Tensor) and a.requires_grad]
    if not diff:
        raise FnxRuntimeError("gradcheck: no input requires grad; call .requires_grad_() on the inputs to check")
    for i in diff:
        if inputs[i].dtype.name not in ("float64", "complex128"):
            raise FnxRuntimeError(f"gradcheck: input {i} is {inputs[i].dtype}; finite differences need float64 "
                                  f"or complex128 inputs (use .double() or .to(fnx.complex128))")
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
                f"{analytic[worst]:.6g} vs numerical {numeric[worst]:.6g} at (output coordinate {worst[0]}, input "
                f"coordinate {worst[1]}; a complex element has two, its real and imaginary parts).\nnumerical:\n"
                f"{numeric}\nanalytic:\n{analytic}")
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
                  raise_exception: bool = True) -> bool:
    """gradcheck of the gradient: the vector-Jacobian product of `func` at `inputs` with `grad_outputs` (by
    default random in [-1, 1), one per output, themselves differentiated too) must match finite differences.

    As in PyTorch, it differentiates `autograd.grad(func(*inputs), inputs, grad_outputs, create_graph=True)` with
    respect to the inputs that require grad and the grad_outputs that do.
    """
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    if grad_outputs is None:
        outs = [o for o in _outputs(func, inputs) if isinstance(o, Tensor) and o.requires_grad]
        grad_outputs = tuple((rand(tuple(o.shape), dtype=o.dtype if o.dtype.is_inexact else None, device=o.device)
                              * 2 - 1).requires_grad_() for o in outs)
    else:
        grad_outputs = tuple(grad_outputs) if isinstance(grad_outputs, (tuple, list)) else (grad_outputs,)
    n = len(grad_outputs)
    diff = [i for i, a in enumerate(inputs) if isinstance(a, Tensor) and a.requires_grad]

    def first_derivative(*args):   # with grad mode on also while gradcheck's finite differences run it
        with enable_grad():
            outs = [o for o in _outputs(func, args[:len(args) - n]) if isinstance(o, Tensor) and o.requires_grad]
            got = grad(outs, [args[i] for i in diff], list(args[len(args) - n:]), create_graph=True,
                       allow_unused=True)
        return tuple(g for g in got if g is not None)

    return gradcheck(first_derivative, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
