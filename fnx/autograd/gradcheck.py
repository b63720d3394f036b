"""`gradcheck`: compare autograd's Jacobian with central finite differences."""
from __future__ import annotations

import numpy as np

from .. import core
from ..core import FnxRuntimeError

__all__ = ["gradcheck", "GradcheckError"]


class GradcheckError(FnxRuntimeError):
    pass


def _outputs(fn, inputs):
    out = fn(*inputs)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def gradcheck(fn, inputs, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True) -> bool:
    """True if every input's analytic gradient matches finite differences; inputs should be float64."""
    from ..ops.creation import zeros_like
    from .engine import grad

    Tensor = core._Tensor
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
        flat_out = out.numel()
        for i in diff:
            x = inputs[i]
            analytic = np.zeros((flat_out, x.numel()))
            for j in range(flat_out):
                g = zeros_like(out)
                g.view(-1)[j] = 1.0
                got = grad([out], [x], [g], retain_graph=True, allow_unused=True)[0]
                if got is not None:
                    analytic[j] = got.detach().cpu().numpy().reshape(-1)
            numeric = np.zeros_like(analytic)
            base = x.detach()
            flat = base.view(-1)
            for m in range(x.numel()):
                orig = float(flat[m])
                with _no_grad():
                    flat[m] = orig + eps
                    plus = _outputs(fn, inputs)[k].detach().cpu().numpy().reshape(-1).astype(np.float64)
                    flat[m] = orig - eps
                    minus = _outputs(fn, inputs)[k].detach().cpu().numpy().reshape(-1).astype(np.float64)
                    flat[m] = orig
                numeric[:, m] = (plus - minus) / (2 * eps)
            if not np.allclose(analytic, numeric, atol=atol, rtol=rtol):
                if not raise_exception:
                    return False
                worst = np.unravel_index(np.argmax(np.abs(analytic - numeric)), analytic.shape)
                raise GradcheckError(
                    f"gradcheck: Jacobian mismatch for output {k} with respect to input {i}: analytic "
                    f"{analytic[worst]:.6g} vs numerical {numeric[worst]:.6g} at (output element {worst[0]}, input "
                    f"element {worst[1]}).\nnumerical:\n{numeric}\nanalytic:\n{analytic}")
    return True


def _no_grad():
    from .grad_mode import no_grad

    return no_grad()
