"""use_deterministic_algorithms: repeated runs give identical bits; nondeterministic paths raise or warn."""
import numpy as np
import pytest

import fnx
import fnx.nn.functional as F
from fnx.determinism import alert_not_deterministic


@pytest.fixture
def deterministic():
    fnx.use_deterministic_algorithms(True)
    yield
    fnx.use_deterministic_algorithms(False)


def _workload(seed: int):
    """Eager and compiled reductions, products, scatter-adds and their gradients, from a fixed seed."""
    rng = np.random.default_rng(seed)
    x = fnx.tensor(rng.standard_normal((64, 257)).astype(np.float32), requires_grad=True)
    w = fnx.tensor(rng.standard_normal((257, 33)).astype(np.float32), requires_grad=True)
    idx = fnx.tensor(rng.integers(0, 8, (64,)))
    h = F.softmax(x @ w, dim=-1)
    pooled = fnx.zeros(8, 33).index_add(0, idx, h)
    loss = pooled.pow(2).sum() + F.layer_norm(x, (257,)).sum()
    loss.backward()
    compiled = fnx.compile(lambda a: (F.softmax(a, dim=-1) * a).sum(0))(x.detach())
    return [t.detach().numpy().copy() for t in (loss, x.grad, w.grad, compiled)]


def test_repeated_runs_are_bit_identical(deterministic):
    first, second = _workload(0), _workload(0)
    for a, b in zip(first, second):
        assert a.tobytes() == b.tobytes()


def test_mode_flags():
    assert not fnx.are_deterministic_algorithms_enabled()
    fnx.use_deterministic_algorithms(True, warn_only=True)
    try:
        assert fnx.are_deterministic_algorithms_enabled()
        with pytest.warns(UserWarning, match="does not have a deterministic implementation"):
            alert_not_deterministic("scatter_add on CUDA")
    finally:
        fnx.use_deterministic_algorithms(False)
    alert_not_deterministic("scatter_add on CUDA")  # silent when the mode is off


def test_nondeterministic_path_raises_in_deterministic_mode(deterministic):
    with pytest.raises(RuntimeError, match="scatter_add on CUDA does not have a deterministic implementation"):
        alert_not_deterministic("scatter_add on CUDA")


@pytest.mark.cuda
def test_cuda_scatter_add_raises_in_deterministic_mode(deterministic):
    x = fnx.zeros(4, device="cuda")
    with pytest.raises(RuntimeError, match="deterministic"):
        x.index_add(0, fnx.tensor([0, 0, 1], device="cuda"), fnx.ones(3, device="cuda"))
