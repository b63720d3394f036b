"""Adaptive softmax (Grave et al., "Efficient softmax approximation for GPUs"), PyTorch's
nn.AdaptiveLogSoftmaxWithLoss: frequent classes get the full hidden size in a head softmax, rarer ones sit in
clusters reached through the head, each cluster a cheaper low-rank projection and its own softmax."""
from __future__ import annotations

from collections import namedtuple

from ...core import FnxRuntimeError, FnxValueError
from ...ops.creation import zeros
from ...ops.joins import cat
from ...tensor import Tensor
from .. import functional as F
from ..containers import ModuleList, Sequential
from ..module import Module
from .linear import Linear

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Log-probabilities of `n_classes` classes sorted by frequency: classes below cutoffs[0] in the head,
    classes in [cutoffs[i], cutoffs[i+1]) in cluster i, whose projection is in_features // div_value^(i+1)
    wide. forward(input, target) gives each target's log-probability and the mean negative log-likelihood;
    log_prob(input) all classes' and predict(input) the most likely class."""

    def __init__(self, in_features: int, n_classes: int, cutoffs, div_value: float = 4.0, head_bias: bool = False,
                 device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise FnxValueError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise FnxValueError("cutoffs should be a sequence of unique, positive integers sorted in an increasing "
                                "order, where each value is between 1 and n_classes-1")
        self.in_features, self.n_classes = in_features, n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value, self.head_bias = div_value, head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, device=device, dtype=dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(in_features // (div_value ** (i + 1)))
            size = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hidden, bias=False, device=device, dtype=dtype),
                                        Linear(hidden, size, bias=False, device=device, dtype=dtype)))

    def reset_parameters(self) -> None:
        self.head.reset_parameters()
        for projection in self.tail:
            for layer in projection:
                layer.reset_parameters()

    def forward(self, input_: Tensor, target_: Tensor) -> ASMoutput:
        if target_.dim() == 1:
            if input_.size(0) != target_.size(0):
                raise FnxRuntimeError("Input and target should have the same size in the batch dimension.")
            if input_.dim() != 2:
                raise FnxRuntimeError(f"1D target tensor expects 2D input tensors, but found inputs with size "
                                      f"{list(input_.shape)}")
        elif target_.dim() == 0:
            if input_.dim() != 1:
                raise FnxRuntimeError(f"0D target tensor expects 1D input tensors, but found inputs with size "
                                      f"{list(input_.shape)}")
        else:
            raise FnxRuntimeError("0D or 1D target tensor expected, multi-target not supported")
        batched = target_.dim() > 0
        x = input_ if batched else input_.unsqueeze(0)
        target = target_ if batched else target_.unsqueeze(0)
        if target.numel() and (int(target.min()) < 0 or int(target.max()) >= self.n_classes):
            raise FnxRuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                                  f"[{int(target.min())}, {int(target.max())}] were found. ")
        head = target.clamp(max=self.shortlist_size - 1)   # a shortlist target's own head column
        output = zeros(target.shape[0], dtype=x.dtype, device=x.device)
        for i in range(self.n_clusters):
            low, high = self.cutoffs[i], self.cutoffs[i + 1]
            in_cluster = (target >= low) & (target < high)
            rows = in_cluster.nonzero().reshape(-1)
            if rows.numel() == 0:
                continue
            cluster = F.log_softmax(self.tail[i](x.index_select(0, rows)), dim=1)
            local = cluster.gather(1, (target.index_select(0, rows) - low).unsqueeze(1)).squeeze(1)
            output = output.index_copy(0, rows, local)
            head = head.masked_fill(in_cluster, self.shortlist_size + i)
        head_logprob = F.log_softmax(self.head(x), dim=1)
        output = output + head_logprob.gather(1, head.unsqueeze(1)).squeeze(1)
        loss = (-output).mean()
        return ASMoutput(output if batched else output.squeeze(0), loss)

    def _full_log_prob(self, x: Tensor, head_output: Tensor) -> Tensor:
        head_logprob = F.log_softmax(head_output, dim=1)
        parts = [head_logprob[:, :self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster = F.log_softmax(self.tail[i](x), dim=1)
            parts.append(cluster + head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        return cat(parts, 1)

    def log_prob(self, input: Tensor) -> Tensor:
        """The log-probabilities of all classes, (batch, n_classes) (or (n_classes,) for one input)."""
        batched = input.dim() > 1
        x = input if batched else input.unsqueeze(0)
        out = self._full_log_prob(x, self.head(x))
        return out if batched else out.squeeze(0)

    def predict(self, input: Tensor) -> Tensor:
        """The most likely class of each input: the head's argmax when it is a shortlist class, else the argmax
        over all classes (computed only for those rows)."""
        batched = input.dim() > 1
        x = input if batched else input.unsqueeze(0)
        head_output = self.head(x)
        output = head_output.argmax(1)
        outside = output >= self.shortlist_size
        if bool(outside.any()):
            rows = outside.nonzero().reshape(-1)
            best = self._full_log_prob(x.index_select(0, rows), head_output.index_select(0, rows)).argmax(1)
            output = output.index_copy(0, rows, best)
        return output if batched else output.squeeze(0)
