"""The PyTorch names and semantics that real programs use, checked under the torch alias a program sees
(`import torch` after `fnx.install_torch_alias()`, in a fresh interpreter), each on a small case with the
values of PyTorch's documentation examples. Complex numbers and autocast are checked elsewhere."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import fnx

ROOT = Path(__file__).resolve().parent.parent

PROGRAM = r'''
import fnx
fnx.install_torch_alias()
import io
import math
import pickle

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.linalg as LA
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence, PackedSequence
from torch.utils.data import DataLoader, RandomSampler, get_worker_info
import torch.utils.data.dataloader

# ---- module paths and flags
assert issubclass(nn.BatchNorm1d, _BatchNorm) and isinstance(nn.BatchNorm2d(3), _BatchNorm)
assert torch.utils.data.dataloader.DataLoader is DataLoader is fnx.data.DataLoader
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
torch.backends.cudnn.benchmark = True
torch.backends.cudnn.deterministic = True
assert torch.backends.cuda.matmul.allow_tf32 and torch.get_float32_matmul_precision() == "high"
torch.set_float32_matmul_precision("highest")
assert not torch.backends.cuda.matmul.allow_tf32
assert torch.accelerator.is_available() == torch.cuda.is_available()
assert torch.accelerator.device_count() == torch.cuda.device_count() >= 0
torch.cuda.manual_seed_all(0)
torch.cuda.manual_seed(0)
torch.cuda.empty_cache()
assert torch.cuda.is_available() or not torch.cuda.is_bf16_supported()  # nanoGPT's dtype choice
host = torch.ones(2)
assert host.pin_memory() is host and not host.is_pinned()  # nanoGPT: x.pin_memory().to(device, non_blocking=True)
assert torch.version.cuda is None and torch.version.__version__ == torch.__version__
assert torch.channels_last is not torch.contiguous_format and torch.preserve_format is not None
x = torch.arange(24.).reshape(1, 2, 3, 4)
assert x.is_contiguous() and x.is_contiguous(memory_format=torch.contiguous_format)
assert not x.is_contiguous(memory_format=torch.channels_last)  # row-major layout, said so
assert torch.ones(2, 1, 3, 3).is_contiguous(memory_format=torch.channels_last)
assert x.to(memory_format=torch.channels_last).tolist() == x.tolist()

# ---- torch.autograd.Variable, as pre-0.4 programs (locuslab TCN, text CNNs) still call it
from torch.autograd import Variable
data = torch.ones(3)
v = Variable(data, requires_grad=True)
assert v is not data and v.requires_grad and v.is_leaf and isinstance(data, Variable)
(v * 2).sum().backward()
assert v.grad.tolist() == [2.0, 2.0, 2.0] and data.grad is None
v.data.add_(1.0)
assert data.tolist() == [2.0, 2.0, 2.0]  # shares its memory
assert not Variable(data).requires_grad and not isinstance(3.0, Variable)

# ---- Tensor methods and functions (examples of PyTorch's docs)
m = torch.arange(6.).reshape(2, 3)
assert m.t().shape == (3, 2) and torch.t(torch.ones(3)).shape == (3,)
assert m.type_as(torch.zeros(1, dtype=torch.int64)).dtype == torch.int64
assert torch.allclose(m.softmax(dim=-1), F.softmax(m, dim=-1)) and m.log_softmax(1).shape == (2, 3)
assert torch.addcmul(torch.ones(2), torch.tensor([2., 3.]), torch.tensor([4., 5.]), value=0.5).tolist() == [5., 8.5]
assert torch.addcdiv(torch.ones(2), torch.tensor([2., 3.]), torch.tensor([4., 6.]), value=2).tolist() == [2., 2.]
p = torch.ones(2)
p.addcmul_(torch.tensor([1., 2.]), torch.tensor([3., 4.])).addcdiv_(torch.tensor([2., 2.]), torch.tensor([1., 4.]))
assert p.tolist() == [6., 9.5]
assert m.new_zeros(2).dtype == torch.float32 and m.new_ones((1, 2)).tolist() == [[1., 1.]]
assert m.new_full((2,), 3.5).tolist() == [3.5, 3.5] and m.new_empty(3).shape == (3,)
assert m.new_tensor([1, 2]).dtype == torch.float32
seven = torch.arange(1., 8)
assert seven.unfold(0, 2, 1).tolist() == [[1., 2.], [2., 3.], [3., 4.], [4., 5.], [5., 6.], [6., 7.]]
assert seven.unfold(0, 2, 2).tolist() == [[1., 2.], [3., 4.], [5., 6.]]
assert torch.unique(torch.tensor([1, 3, 2, 3], dtype=torch.long)).tolist() == [1, 2, 3]
out, inverse = torch.unique(torch.tensor([[1, 3], [2, 3]], dtype=torch.long), sorted=True, return_inverse=True)
assert out.tolist() == [1, 2, 3] and inverse.tolist() == [[0, 2], [1, 2]]
out, counts = torch.tensor([1, 3, 2, 3]).unique(return_counts=True)
assert counts.tolist() == [1, 1, 2]
a = torch.tensor([[[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1]],
                  [[0, 0, 1, 1], [0, 0, 1, 1], [1, 1, 1, 1]],
                  [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1]]])
assert torch.unique(a, dim=0).tolist() == [[[0, 0, 1, 1], [0, 0, 1, 1], [1, 1, 1, 1]],
                                           [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1]]]
boundaries, v = torch.tensor([1, 3, 5, 7, 9]), torch.tensor([[3, 6, 9], [3, 6, 9]])
assert torch.bucketize(v, boundaries).tolist() == [[1, 3, 4], [1, 3, 4]]
assert torch.bucketize(v, boundaries, right=True).tolist() == [[2, 3, 5], [2, 3, 5]]
e = torch.erfinv(torch.tensor([0, 0.5, -1.]))
assert e[0] == 0 and abs(e[1].item() - 0.4769) < 1e-4 and e[2].item() == -math.inf
assert torch.tensor([0.5]).erfinv().item() == e[1].item()
s = torch.zeros(1, 2, 1)
assert s.squeeze_(0) is s and s.shape == (2, 1) and s.unsqueeze_(0).shape == (1, 2, 1)
assert m.ndimension() == 2 and not m.is_sparse and m.get_device() == -1
assert torch.is_tensor(m) and not torch.is_tensor([1]) and torch.pi == math.pi
g = torch.arange(9.).reshape(3, 3)
assert torch.as_strided(g, (2, 2), (1, 2)).tolist() == [[0., 2.], [1., 3.]]
assert g.as_strided((2, 2), (1, 2), 1).tolist() == [[1., 3.], [2., 4.]]
u, w = torch.tensor([1., 2.]), torch.tensor([4., 6.])
assert torch.dist(u, w).item() == 5. and u.dist(w, 1).item() == 7. and torch.dist(u, w, math.inf).item() == 4.
assert torch.dist(u, w, 0).item() == 2.
assert torch.FloatTensor([1, 2]).dtype == torch.float32 and torch.LongTensor(2, 3).shape == (2, 3)
assert torch.DoubleTensor([1]).dtype == torch.float64 and torch.BoolTensor([1, 0]).tolist() == [True, False]
assert isinstance(torch.zeros(2), torch.FloatTensor) and not isinstance(torch.zeros(2), torch.LongTensor)

# ---- fnx.linalg, with gradients (linalg.norm's documented example)
B = (torch.arange(9, dtype=torch.float64) - 4).reshape(3, 3).requires_grad_()
for ord, expected in (("fro", 7.7460), ("nuc", 9.7980), (2, 7.3485), (-2, 0.0)):
    assert abs(LA.norm(B, ord).item() - expected) < 1e-4, (ord, LA.norm(B, ord))
A = torch.arange(9, dtype=torch.float).reshape(3, 3)
assert abs(LA.matrix_norm(A).item() - 14.2829) < 1e-4 and LA.matrix_norm(A, ord=-1).item() == 9.
C = torch.tensor([[2., 1.], [1., 3.], [0., 1.]], dtype=torch.float64, requires_grad=True)
U, S, Vh = LA.svd(C, full_matrices=False)
LA.matrix_norm(C, ord="nuc").backward()
assert torch.allclose(C.grad, (U @ Vh).detach())  # d||C||_* / dC = U V^T
C.grad = None
LA.matrix_norm(C, ord=2).backward()
assert torch.allclose(C.grad, torch.outer(U[:, 0], Vh[0]).detach())  # = u1 v1^T
assert torch.allclose(LA.svdvals(C), S)
sym = torch.tensor([[2., 1.], [1., 2.]], dtype=torch.float64)
assert torch.allclose(LA.eigh(sym).eigenvalues, torch.tensor([1., 3.], dtype=torch.float64))
Q, R = LA.qr(C)
assert torch.allclose(Q @ R, C) and torch.allclose(LA.pinv(C) @ C, torch.eye(2, dtype=torch.float64))
sol = LA.lstsq(C, torch.tensor([[3.], [4.], [1.]], dtype=torch.float64)).solution
assert torch.allclose(sol, torch.tensor([[1.], [1.]], dtype=torch.float64))
for f in (lambda c: LA.svdvals(c).sum(), lambda c: LA.eigh(c.T @ c)[0].sum(), lambda c: LA.qr(c)[1].sum(),
          lambda c: LA.pinv(c).sum(), lambda c: LA.lstsq(c, torch.ones(3, 1, dtype=torch.float64)).solution.sum()):
    assert torch.autograd.gradcheck(f, (C.detach().requires_grad_(),))

# ---- modules
lin = nn.Linear(2, 2)
seen = []
lin.register_full_backward_pre_hook(lambda mod, grad_output: (grad_output[0] * 2,))
lin.register_full_backward_hook(lambda mod, grad_input, grad_output: seen.append(grad_output[0].tolist()))
inp = torch.ones(1, 2, requires_grad=True)
lin(inp).sum().backward()
assert seen == [[[2., 2.]]] and lin.bias.grad.tolist() == [2., 2.]
lstm = nn.LSTM(2, 3, batch_first=True)
assert lstm.flatten_parameters() is None
seqs = [torch.randn(3, 2), torch.randn(1, 2)]
padded = pad_sequence(seqs, batch_first=True)
packed = pack_padded_sequence(padded, torch.tensor([3, 1]), batch_first=True)
assert isinstance(packed, PackedSequence) and packed.batch_sizes.tolist() == [2, 1, 1]
out, (h, c) = lstm(packed)
out, lengths = pad_packed_sequence(out, batch_first=True)
assert out.shape == (2, 3, 3) and lengths.tolist() == [3, 1] and out[1, 1:].abs().sum() == 0
_, (h_short, _) = lstm(seqs[1].unsqueeze(0))
assert torch.allclose(h[0, 1], h_short[0, 0])  # the padded sequence stopped at its length
dp = nn.DataParallel(nn.Linear(2, 1))
assert isinstance(dp.module, nn.Linear) and dp(torch.ones(4, 2)).shape == (4, 1)
img = torch.arange(4.).reshape(1, 1, 2, 2)
assert F.grid_sample(img, torch.zeros(1, 1, 1, 2), align_corners=False).item() == 1.5
grid = F.affine_grid(torch.tensor([[[1., 0, 0], [0, 1, 0]]]), (1, 1, 2, 2), align_corners=False)
assert torch.allclose(F.grid_sample(img, grid, align_corners=False), img)

# ---- saving: plain values, whole modules, safe_globals
class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 1)

buf = io.BytesIO()
torch.save({"model": Head(), "arr": np.arange(3), "step": 7}, buf)
try:
    torch.load(io.BytesIO(buf.getvalue()))
except pickle.UnpicklingError as e:  # as torch.load(weights_only=True) refuses it
    assert "__main__.Head, which is not allowed" in str(e)
else:
    raise AssertionError("a class that was not allowed loaded")
with torch.serialization.safe_globals([Head]):
    back = torch.load(io.BytesIO(buf.getvalue()))
assert isinstance(back["model"], Head) and back["arr"].tolist() == [0, 1, 2] and back["step"] == 7

# ---- data
sampler = RandomSampler(range(5), replacement=True, num_samples=10 ** 10)
it = iter(sampler)
draws = [next(it) for _ in range(20)]
assert len(sampler) == 10 ** 10 and all(0 <= d < 5 for d in draws) and get_worker_info() is None
assert f"{torch.tensor(1.23456):.3f}" == "1.235" and format(torch.tensor(2.5), ".1f") == "2.5"
assert torch.sum(m, axis=1, keepdims=True).shape == (2, 1)
print("ok")
'''


def test_section_two_names_under_the_torch_alias(tmp_path):
    script = tmp_path / "names.py"
    script.write_text(textwrap.dedent(PROGRAM))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ok"]


def test_is_contiguous_reads_the_strides_of_the_memory_format():
    x = fnx.zeros(2, 3, 4, 5)
    nhwc = x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
    assert nhwc.is_contiguous(memory_format=fnx.channels_last) and not nhwc.is_contiguous()
    assert not x.is_contiguous(memory_format=fnx.channels_last) and not x.is_contiguous(fnx.channels_last_3d)
    assert fnx.zeros(1, 2, 1, 1, 3).permute(0, 4, 1, 2, 3).is_contiguous(memory_format=fnx.channels_last_3d)
    assert not fnx.zeros(2, 3).is_contiguous(memory_format=fnx.channels_last)
    with pytest.raises(TypeError, match="is_contiguous: memory_format must be fnx.contiguous_format"):
        x.is_contiguous(memory_format="channels_last")


def test_set_printoptions_as_pytorch_documents_it():
    try:
        fnx.set_printoptions(precision=2)
        assert repr(fnx.tensor([1.12345])) == "tensor([1.12])"
        fnx.set_printoptions(threshold=5)
        assert repr(fnx.arange(10)) == "tensor([0, 1, 2, ..., 7, 8, 9])"
        fnx.set_printoptions(sci_mode=True)
        assert repr(fnx.tensor([1.5, 2.0])) == "tensor([1.50e+00, 2.00e+00])"
        fnx.set_printoptions(profile="full")
        assert "..." not in repr(fnx.arange(2000)) and repr(fnx.tensor([1.12345])) == "tensor([1.1235])"
        fnx.set_printoptions(profile="short")
        assert repr(fnx.tensor([1.12345])) == "tensor([1.12])"
        with pytest.raises(ValueError, match=r"profile must be one of \['default', 'short', 'full'\]"):
            fnx.set_printoptions(profile="long")
    finally:
        fnx.set_printoptions(profile="default")
    assert repr(fnx.tensor([1.12345])) == "tensor([1.1235])" and "..." not in repr(fnx.arange(10))


def test_diff_and_cdist_give_pytorchs_documented_examples():
    a = fnx.tensor([1, 3, 2])
    assert fnx.diff(a).tolist() == [2, -1] and a.diff(append=fnx.tensor([4, 5])).tolist() == [2, -1, 2, 1]
    c = fnx.tensor([[1, 2, 3], [3, 4, 5]])
    assert fnx.diff(c, dim=0).tolist() == [[2, 2, 2]] and fnx.diff(c, dim=1).tolist() == [[1, 1], [1, 1]]
    assert fnx.diff(fnx.tensor([True, False, False])).tolist() == [True, False]
    x1 = fnx.tensor([[0.9041, 0.0196], [-0.3108, -2.4423], [-0.4821, 1.059]])
    x2 = fnx.tensor([[-2.1763, -0.4713], [-0.6986, 1.3702]])
    expected = [[3.1193, 2.0959], [2.7138, 3.8322], [2.2830, 0.3791]]
    assert (fnx.cdist(x1, x2, p=2.0) - fnx.tensor(expected)).abs().max().item() < 1e-4


def test_triangle_indices_and_isin_give_pytorchs_documented_examples():
    assert fnx.triu_indices(3, 3).tolist() == [[0, 0, 0, 1, 1, 2], [0, 1, 2, 1, 2, 2]]
    assert fnx.triu_indices(4, 3, -1).tolist() == [[0, 0, 0, 1, 1, 1, 2, 2, 3], [0, 1, 2, 0, 1, 2, 1, 2, 2]]
    assert fnx.tril_indices(3, 3).tolist() == [[0, 1, 1, 2, 2, 2], [0, 0, 1, 0, 1, 2]]
    assert fnx.tril_indices(4, 3, -1).tolist() == [[1, 2, 2, 3, 3, 3], [0, 0, 1, 0, 1, 2]]
    assert fnx.tril_indices(4, 3, 1).tolist() == [[0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3], [0, 1, 0, 1, 2, 0, 1, 2, 0, 1, 2]]
    assert fnx.tril_indices(2, 2).dtype is fnx.int64 and fnx.triu_indices(0, 3).shape == (2, 0)
    with pytest.raises(TypeError, match="triu_indices: dtype must be fnx.int32 or fnx.int64"):
        fnx.triu_indices(2, 2, dtype=fnx.float32)
    assert fnx.isin(fnx.tensor([[1, 2], [3, 4]]), fnx.tensor([2, 3])).tolist() == [[False, True], [True, False]]
    assert fnx.isin(fnx.tensor([1, 2]), 2).tolist() == [False, True] and fnx.isin(2, fnx.tensor([1, 2])).item()
    assert fnx.isin(fnx.tensor([1, 2]), fnx.tensor([2]), invert=True).tolist() == [True, False]


def test_tensor_split_gives_pytorchs_documented_examples():
    def parts(*args, **kwargs):
        return [t.tolist() for t in fnx.tensor_split(*args, **kwargs)]

    assert parts(fnx.arange(8), 3) == [[0, 1, 2], [3, 4, 5], [6, 7]]
    assert parts(fnx.arange(7), 3) == [[0, 1, 2], [3, 4], [5, 6]]
    assert parts(fnx.arange(7), (1, 6)) == [[0], [1, 2, 3, 4, 5], [6]]
    x = fnx.arange(14).reshape(2, 7)
    assert [t.tolist() for t in x.tensor_split(3, dim=1)] == [[[0, 1, 2], [7, 8, 9]], [[3, 4], [10, 11]],
                                                               [[5, 6], [12, 13]]]
    assert parts(x, fnx.tensor([1, 6]), dim=1) == [[[0], [7]], [[1, 2, 3, 4, 5], [8, 9, 10, 11, 12]], [[6], [13]]]
    with pytest.raises(RuntimeError, match="number of sections must be larger than 0"):
        fnx.tensor_split(x, 0)


def test_diag_embed_as_pytorch_documents_it():
    a = fnx.tensor([[0.5, -1.0, 2.0], [1.0, 2.0, 3.0]])
    assert fnx.diag_embed(a).shape == (2, 3, 3) and fnx.diag_embed(a)[0].tolist() == [[0.5, 0, 0], [0, -1, 0],
                                                                                        [0, 0, 2]]
    assert fnx.diag_embed(a, offset=1, dim1=0, dim2=2).shape == (4, 2, 4)
    assert fnx.diag_embed(fnx.tensor([1.0, 2.0]), -1).tolist() == [[0, 0, 0], [1, 0, 0], [0, 2, 0]]
    with pytest.raises(RuntimeError, match="diagonal dimensions cannot be identical"):
        fnx.diag_embed(a, dim1=1, dim2=-2)
