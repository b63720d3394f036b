"""Activation modules: thin wrappers of the functions in fnx.nn.functional, with PyTorch's reprs."""
from __future__ import annotations

from ...ops.creation import empty
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter

__all__ = ["ReLU", "ReLU6", "LeakyReLU", "PReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish", "Sigmoid", "Tanh",
           "Hardtanh", "Hardsigmoid", "Hardswish", "Hardshrink", "Softshrink", "Tanhshrink", "Softsign", "Softplus",
           "LogSigmoid", "Threshold", "GLU", "Softmax", "Softmin", "LogSoftmax", "Softmax2d", "RReLU"]


def _inplace_str(inplace: bool, lead: str = ", ") -> str:
    return f"{lead}inplace=True" if inplace else ""


class _Inplace(Module):
    """An activation whose only option is `inplace`."""

    _fn = None

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._fn(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return _inplace_str(self.inplace, "")


class _Plain(Module):
    """An activation without options."""

    _fn = None

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._fn(input)


class ReLU(_Inplace):
    """Applies `F.relu`: max(x, 0)."""
    _fn = staticmethod(F.relu)


class SELU(_Inplace):
    """Applies `F.selu`: scaled ELU with the self-normalizing constants."""
    _fn = staticmethod(F.selu)


class SiLU(_Inplace):
    """Applies `F.silu`: x * sigmoid(x)."""
    _fn = staticmethod(F.silu)


class Mish(_Inplace):
    """Applies `F.mish`: x * tanh(softplus(x))."""
    _fn = staticmethod(F.mish)


class Hardsigmoid(_Inplace):
    """Applies `F.hardsigmoid`: relu6(x + 3) / 6."""
    _fn = staticmethod(F.hardsigmoid)


class Hardswish(_Inplace):
    """Applies `F.hardswish`: x * relu6(x + 3) / 6."""
    _fn = staticmethod(F.hardswish)


class Sigmoid(_Plain):
    """Applies `F.sigmoid`: 1 / (1 + exp(-x))."""
    _fn = staticmethod(F.sigmoid)


class Tanh(_Plain):
    """Applies `F.tanh`."""
    _fn = staticmethod(F.tanh)


class Tanhshrink(_Plain):
    """Applies `F.tanhshrink`: x - tanh(x)."""
    _fn = staticmethod(F.tanhshrink)


class Softsign(_Plain):
    """Applies `F.softsign`: x / (1 + |x|)."""
    _fn = staticmethod(F.softsign)


class LogSigmoid(_Plain):
    """Applies `F.logsigmoid`: log(sigmoid(x))."""
    _fn = staticmethod(F.logsigmoid)


class Hardtanh(Module):
    """Applies `F.hardtanh`: x clamped to [min_val, max_val]."""
    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
        super().__init__()
        if max_val <= min_val:
            raise ValueError("max_val must be greater than min_val")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}{_inplace_str(self.inplace)}"


class ReLU6(Hardtanh):
    """Applies `F.relu6`: x clamped to [0, 6]."""
    def __init__(self, inplace: bool = False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return _inplace_str(self.inplace, "")


class LeakyReLU(Module):
    """Applies `F.leaky_relu`: x where x > 0, else negative_slope * x."""
    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}{_inplace_str(self.inplace)}"


class ELU(Module):
    """Applies `F.elu`: x where x > 0, else alpha * (exp(x) - 1)."""
    _fn = staticmethod(F.elu)

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._fn(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}{_inplace_str(self.inplace)}"


class CELU(ELU):
    """Applies `F.celu`: x where x > 0, else alpha * (exp(x / alpha) - 1)."""
    _fn = staticmethod(F.celu)


class PReLU(Module):
    """max(0, x) + weight * min(0, x) with a learned slope (one, or one per channel)."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(empty(num_parameters, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.constant_(self.weight, self.init)

    def forward(self, input: Tensor) -> Tensor:
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class GELU(Module):
    """Applies `F.gelu` (exact, or approximate="tanh")."""
    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Hardshrink(Module):
    """Applies `F.hardshrink`: x where |x| > lambd, else 0."""
    _fn = staticmethod(F.hardshrink)

    def __init__(self, lambd: float = 0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._fn(input, self.lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    """Applies `F.softshrink`: x moved towards 0 by lambd, 0 within [-lambd, lambd]."""
    _fn = staticmethod(F.softshrink)


class Softplus(Module):
    """Applies `F.softplus`: log(1 + exp(beta * x)) / beta."""
    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input: Tensor) -> Tensor:
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Threshold(Module):
    """Applies `F.threshold`: x where x > threshold, else value."""
    def __init__(self, threshold: float, value: float, inplace: bool = False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}{_inplace_str(self.inplace)}"


class GLU(Module):
    """Applies `F.glu` along `dim`: a * sigmoid(b) for the two halves a, b."""
    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class _SoftmaxLike(Module):
    _fn = None

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._fn(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(_SoftmaxLike):
    """softmax along `dim`."""

    _fn = staticmethod(F.softmax)


class Softmin(_SoftmaxLike):
    """Applies `F.softmin` along `dim`: softmax(-x)."""
    _fn = staticmethod(F.softmin)


class LogSoftmax(_SoftmaxLike):
    """log_softmax along `dim`."""

    _fn = staticmethod(F.log_softmax)


class Softmax2d(Module):
    """softmax over the channel dim of (N, C, H, W) or (C, H, W)."""

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D instead")
        return F.softmax(input, -3)


class RReLU(Module):
    """Leaky ReLU whose negative slope is drawn from U(lower, upper) in training and is their mean in eval."""

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}{_inplace_str(self.inplace)}"
