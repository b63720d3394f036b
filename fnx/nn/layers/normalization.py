"""Normalization layers: BatchNorm1d/2d/3d, InstanceNorm1d/2d/3d, LayerNorm, RMSNorm, GroupNorm, LocalResponseNorm and
PyTorch's legacy CrossMapLRN2d.

BatchNorm keeps running statistics in buffers (running_mean, running_var, num_batches_tracked). When the
module is a pytree argument of a transform (fnx.grad(loss)(model, ...)), its floating buffers are traced
values on a copy of the module: the update then rebinds the copy's buffers (functional state that the
caller may return) instead of writing in place; under fnx.compile the compiled call writes the new values
back into the module's buffers. Buffers enter the computation detached, so their gradients are zero.
"""
from __future__ import annotations

from ... import dtypes as _dt
from ...autograd import Function, no_grad
from ...core import FnxRuntimeError, FnxValueError
from ...ops.arrange import pad
from ...ops.creation import ones, tensor, zeros
from ...ops.reduce import cumsum
from ...tensor import Tensor, Tracer
from .. import functional as F
from .. import init
from ..functional_norm import batch_norm_with_stats, write_running_stat
from ..module import Module
from ..parameter import Parameter, optional_parameter

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d",
           "LayerNorm", "RMSNorm", "GroupNorm", "LocalResponseNorm", "CrossMapLRN2d"]


class _NormBase(Module):
    """Affine parameters (weight, bias) and running statistics shared by batch and instance norm."""

    _version = 2

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *, bias: bool = True):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        optional_parameter(self, "weight", (num_features,) if affine else None, device, dtype)
        optional_parameter(self, "bias", (num_features,) if affine and bias else None, device, dtype)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=_dt.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input_dim(self, input: Tensor) -> None:
        raise NotImplementedError

    def extra_repr(self) -> str:
        return ("{num_features}, eps={eps}, momentum={momentum}, affine={affine}, bias={use_bias}, "
                "track_running_stats={track_running_stats}".format(**self.__dict__, use_bias=self.bias is not None))

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs) -> None:
        """Checkpoints without version metadata (PyTorch < 0.4.1 style) may lack num_batches_tracked."""
        version = local_metadata.get("version")
        key = prefix + "num_batches_tracked"
        if (version is None or version < 2) and self.track_running_stats and key not in state_dict:
            state_dict[key] = tensor(0, dtype=_dt.int64) if self.num_batches_tracked is None \
                else self.num_batches_tracked
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)


class _BatchNorm(_NormBase):
    def _set_buffer(self, name: str, value: Tensor) -> None:
        """Store a new running statistic: in place, or by rebinding when the buffer is traced."""
        if isinstance(self._buffers[name], Tracer):
            self._buffers[name] = value
        else:
            write_running_stat(self._buffers[name], value)

    def _count_batch(self) -> None:
        tracked = self.num_batches_tracked
        if type(tracked) is Tensor and not isinstance(self.running_mean, Tracer):   # eager: the array in place
            tracked._value += 1
            tracked._version[0] += 1
            return
        count = tracked + 1
        if isinstance(self.running_mean, Tracer):
            self._buffers["num_batches_tracked"] = count
        else:
            write_running_stat(tracked, count)

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self._count_batch()
            if self.momentum is not None:
                factor = self.momentum
            elif isinstance(self.num_batches_tracked, Tracer):   # traced by fnx.compile: a cumulative average
                factor = 1.0 / self.num_batches_tracked
            else:
                factor = 1.0 / float(self.num_batches_tracked)
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        keep = not self.training or self.track_running_stats
        running_mean = self.running_mean.detach() if keep and self.running_mean is not None else None
        running_var = self.running_var.detach() if keep and self.running_var is not None else None
        y, new_mean, new_var = batch_norm_with_stats(input, running_mean, running_var, self.weight, self.bias,
                                                     use_batch_stats, factor, self.eps, in_place=True)
        if new_mean is not None:
            self._set_buffer("running_mean", new_mean)
            self._set_buffer("running_var", new_var)
        return y


class BatchNorm1d(_BatchNorm):
    """Batch normalization over (N, C) or (N, C, L)."""

    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {input.ndim}D input)")


class BatchNorm2d(_BatchNorm):
    """Batch normalization over (N, C, H, W): per channel, over N, H and W."""

    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim != 4:
            raise ValueError(f"expected 4D input (got {input.ndim}D input)")


class BatchNorm3d(_BatchNorm):
    """Batch normalization over (N, C, D, H, W) inputs, with running statistics."""
    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim != 5:
            raise ValueError(f"expected 5D input (got {input.ndim}D input)")


class SyncBatchNorm(_BatchNorm):
    """Batch normalization whose batch statistics cover the batches of every rank of the process group
    (torch.nn.SyncBatchNorm): in training, with fnx.distributed initialised over more than one rank, the mean and
    variance per channel come from sums all-reduced across ranks (differentiable collectives, so the gradient
    reaches every rank's inputs as one big batch's would); otherwise it is BatchNorm. Any input of at least 2 dims
    (N, C, ...). `convert_sync_batchnorm(model)` swaps a model's batch norms for these."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, process_group=None, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        self.process_group = process_group

    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim < 2:
            raise ValueError(f"expected at least 2D input (got {input.ndim}D input)")

    def forward(self, input: Tensor) -> Tensor:
        from ... import distributed as dist

        if not (self.training and dist.is_initialized() and dist.get_world_size() > 1):
            return super().forward(input)
        self._check_input_dim(input)
        dims = (0,) + tuple(range(2, input.ndim))
        shape = (1, input.shape[1]) + (1,) * (input.ndim - 2)
        local = tensor(float(input.numel() // max(input.shape[1], 1)), dtype=input.dtype, device=input.device)
        count = dist.functional.all_reduce(local, "sum", group=self.process_group)
        mean = dist.functional.all_reduce(input.sum(dims), "sum", group=self.process_group) / count
        centered = input - mean.reshape(shape)
        var = dist.functional.all_reduce((centered * centered).sum(dims), "sum", group=self.process_group) / count
        y = centered * (var + self.eps).rsqrt().reshape(shape)
        if self.weight is not None:
            y = y * self.weight.reshape(shape)
        if self.bias is not None:
            y = y + self.bias.reshape(shape)
        if self.track_running_stats and self.num_batches_tracked is not None:
            self._count_batch()
            factor = self.momentum if self.momentum is not None else 1.0 / float(self.num_batches_tracked)
            with no_grad():
                unbiased = var * (count / (count - 1).clamp(min=1))
                self._set_buffer("running_mean", self.running_mean * (1 - factor) + mean * factor)
                self._set_buffer("running_var", self.running_var * (1 - factor) + unbiased * factor)
        return y

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group=None) -> Module:
        """`module` with every BatchNorm1d/2d/3d in it (itself included) replaced by a SyncBatchNorm holding the
        same parameters, running statistics and train/eval mode."""
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats,
                      process_group)
            if module.affine:
                out.weight, out.bias = module.weight, module.bias
            out.running_mean, out.running_var = module.running_mean, module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out


class _InstanceNorm(_NormBase):
    _nd = 0

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device=None, dtype=None, *, bias: bool = True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def forward(self, input: Tensor) -> Tensor:
        nd = self._nd
        if input.ndim not in (nd + 1, nd + 2):
            raise ValueError(f"expected {nd + 1}D or {nd + 2}D input (got {input.ndim}D input)")
        if input.ndim == nd + 1:
            return self.forward(input.unsqueeze(0)).squeeze(0)
        return F.instance_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                               self.training or not self.track_running_stats,
                               0.0 if self.momentum is None else self.momentum, self.eps)


class InstanceNorm1d(_InstanceNorm):
    """Instance normalization of (N, C, L) inputs: each sample and channel over its length."""
    _nd = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance normalization of (N, C, H, W) inputs: each sample and channel over its pixels."""
    _nd = 2


class InstanceNorm3d(_InstanceNorm):
    """Instance normalization of (N, C, D, H, W) inputs: each sample and channel over its voxels."""
    _nd = 3


def _shape_tuple(normalized_shape) -> tuple:
    return (int(normalized_shape),) if isinstance(normalized_shape, int) else tuple(normalized_shape)


def _affine_parameters(module: Module, shape: tuple, affine: bool, bias: bool, device, dtype) -> None:
    """A norm layer's `weight` (ones) and `bias` (zeros) of `shape`, or None entries when not affine."""
    module.register_parameter("weight", Parameter(ones(shape, device=device, dtype=dtype)) if affine else None)
    module.register_parameter("bias", Parameter(zeros(shape, device=device, dtype=dtype)) if affine and bias
                              else None)


def _reset_affine(module: Module) -> None:
    if module.weight is not None:
        init.ones_(module.weight)
    if module.bias is not None:
        init.zeros_(module.bias)


class LayerNorm(Module):
    """Normalize over the trailing `normalized_shape` dims, then an elementwise affine map."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 device=None, dtype=None):
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        _affine_parameters(self, self.normalized_shape, elementwise_affine, bias, device, dtype)

    def reset_parameters(self) -> None:
        _reset_affine(self)

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return "{normalized_shape}, eps={eps}, elementwise_affine={elementwise_affine}, bias={use_bias}".format(
            **self.__dict__, use_bias=self.bias is not None)


class RMSNorm(Module):
    """x / sqrt(mean(x^2) + eps) over the trailing dims, times a learned weight."""

    def __init__(self, normalized_shape, eps: float | None = None, elementwise_affine: bool = True, device=None,
                 dtype=None):
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(ones(self.normalized_shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)

    def reset_parameters(self) -> None:
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, input: Tensor) -> Tensor:
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return "{normalized_shape}, eps={eps}, elementwise_affine={elementwise_affine}".format(**self.__dict__)


class GroupNorm(Module):
    """Normalize each sample over groups of channels, then a per-channel affine map."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True, device=None,
                 dtype=None, *, bias: bool = True):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        _affine_parameters(self, (num_channels,), affine, bias, device, dtype)

    def reset_parameters(self) -> None:
        _reset_affine(self)

    def forward(self, input: Tensor) -> Tensor:
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return "{num_groups}, {num_channels}, eps={eps}, affine={affine}, bias={use_bias}".format(
            **self.__dict__, use_bias=self.bias is not None)


class LocalResponseNorm(Module):
    """Normalize each channel by the mean square of its `size` neighbouring channels (F.local_response_norm)."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input: Tensor) -> Tensor:
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return "{size}, alpha={alpha}, beta={beta}, k={k}".format(**self.__dict__)


class _CrossMapLRN(Function):
    """PyTorch's legacy (Lua Torch) cross-channel LRN as torch.nn's CrossMapLRN2d computes it: the forward's channel
    window grows by one channel per step from [0, pre_pad) and then drops channels from 1 on (its running sum never
    drops channel 0), and the backward is PyTorch's hand-written one (that of a centred window), not the forward's
    derivative; both are reproduced so that models ported from it train the same."""

    @staticmethod
    def forward(ctx, input: Tensor, size: int, alpha: float, beta: float, k: float) -> Tensor:
        channels = input.shape[1]
        pre_pad = int((size - 1) / 2 + 1)
        sums = cumsum(input * input, 1)
        upper = tensor([min(c + pre_pad - 1, channels - 1) for c in range(channels)], device=input.device)
        dropped = tensor([max(c - pre_pad, 0) for c in range(channels)], device=input.device)
        window = sums.index_select(1, upper) - (sums.index_select(1, dropped) - sums[:, :1])
        scale = window * (alpha / size) + k
        output = input * scale ** -beta
        ctx.save_for_backward(input, output, scale)
        ctx.size, ctx.alpha, ctx.beta = size, alpha, beta
        return output

    @staticmethod
    def backward(ctx, grad_output: Tensor):
        input, output, scale = ctx.saved_tensors
        size, channels = ctx.size, input.shape[1]
        inverse_pre_pad = int(size - (size - 1) / 2)
        if size < 2:
            raise FnxRuntimeError("CrossMapLRN2d: PyTorch's legacy backward needs size >= 2 (its padded ratio buffer "
                                  f"is too short for size {size}); use LocalResponseNorm instead")
        ratio = pad(grad_output * output / scale, (0, 0, 0, 0, inverse_pre_pad, size - 1 - inverse_pre_pad))
        accum = ratio[:, :channels]
        for shift in range(1, size):
            accum = accum + ratio[:, shift:shift + channels]
        grad_input = scale ** -ctx.beta * grad_output - (2 * ctx.alpha * ctx.beta / size) * input * accum
        return grad_input, None, None, None, None


class CrossMapLRN2d(Module):
    """PyTorch's legacy cross-channel local response normalization of (N, C, H, W) inputs (from Lua Torch):
    x / (k + alpha / size * sum of x^2 over a channel window)^beta, with that module's window bookkeeping and
    backward (see `LocalResponseNorm` for the centred-window form)."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim != 4:
            raise FnxValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.ndim}D instead.")
        return _CrossMapLRN.apply(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return "{size}, alpha={alpha}, beta={beta}, k={k}".format(**self.__dict__)
