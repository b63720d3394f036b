"""C elementwise kernels that read an operand transposed run in square tiles (fnx/lowering/codegen.py, `_tile_dim`).

Tiling only reorders independent elements, so results must equal numpy's bit for bit. Kernels take their sizes
and strides as arguments, so every shape of one test reuses the same compiled kernel.
"""
from __future__ import annotations

import numpy as np
import pytest

import fnx

RNG = np.random.default_rng(0)
# Odd, prime, power-of-two and tile-boundary sizes (tiles are 16 wide), and a size above the OpenMP threshold.
SHAPES_2D = [(2, 3), (5, 7), (16, 16), (17, 33), (13, 64), (64, 31), (2, 97), (97, 2), (256, 512)]
SHAPES_3D = [(2, 3, 5), (3, 16, 17), (4, 13, 32), (2, 33, 7)]


def data(shape: tuple, dtype=np.float32) -> np.ndarray:
    if np.dtype(dtype).kind in "iu":
        return RNG.integers(-50, 50, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def run(f, *arrays: np.ndarray) -> tuple[list[np.ndarray], list]:
    """Compiled outputs of `f` on `arrays` (as numpy) and its generated kernels."""
    args = [fnx.tensor(a) for a in arrays]
    compiled = fnx.compile(f)
    out = compiled(*args)
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    return [o.numpy() for o in outs], compiled.lower(*args).kernels()


def tiled(kernels: list) -> list[bool]:
    return ["in tiles" in k.source.splitlines()[1] for k in kernels]


def assert_same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want, equal_nan=True)


def relu_backward(a, g):
    """The W5 kernel: ReLU's backward with the incoming gradient read transposed."""
    return fnx.where(a > 0, g.T, 0.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_transposed_select_matches_numpy_for_all_sizes(dtype):
    for shape in SHAPES_2D:
        a, g = data(shape, dtype), data(shape[::-1], dtype)
        (got,), kernels = run(relu_backward, a, g)
        assert_same(got, np.where(a > 0, g.T, dtype(0)))
        assert tiled(kernels) == [True]


def test_transposed_integer_operands_match_numpy():
    for shape in [(5, 7), (16, 48), (33, 2)]:
        a, b = data(shape, np.int32), data(shape[::-1], np.int32)
        (got,), kernels = run(lambda x, y: x * 3 - y.T, a, b)
        assert_same(got, a * 3 - b.T)
        assert tiled(kernels) == [True]


@pytest.mark.parametrize("perm", [(0, 2, 1), (2, 0, 1), (1, 2, 0), (2, 1, 0)])
def test_permuted_3d_operands_match_numpy(perm):
    inverse = tuple(np.argsort(perm))
    for shape in SHAPES_3D:
        a = data(shape)
        b = data(tuple(shape[d] for d in inverse))   # b.permute(perm) has `shape`
        (got,), kernels = run(lambda x, y: x * 2 + y.permute(*perm), a, b)
        assert_same(got, a * np.float32(2) + b.transpose(perm))
        assert tiled(kernels) == [True]


def test_two_operands_transposed_along_different_dims():
    for shape in SHAPES_3D:
        a = data(shape)
        b = data((shape[0], shape[2], shape[1]))   # unit stride along kernel dim 1
        c = data((shape[2], shape[1], shape[0]))   # unit stride along kernel dim 0
        (got,), kernels = run(lambda x, y, z: x - y.permute(0, 2, 1) * z.permute(2, 1, 0), a, b, c)
        assert_same(got, a - b.transpose(0, 2, 1) * c.transpose(2, 1, 0))
        assert tiled(kernels) == [True]


def test_broadcast_operands_mixed_with_a_transposed_one():
    for n, m in SHAPES_2D:
        a, g, row, col = data((n, m)), data((m, n)), data((m,)), data((n, 1))
        (got,), kernels = run(lambda x, y, r, c: (x + y.T) * r - c, a, g, row, col)
        assert_same(got, (a + g.T) * row - col)
        assert tiled(kernels) == [True]


def test_several_outputs_and_a_transposed_operand_broadcast_over_a_leading_dim():
    for b, n, m in [(3, 5, 7), (2, 17, 16), (4, 1, 9)]:
        x, w = data((b, n, m)), data((m, n))
        got, kernels = run(lambda u, v: (u * v.T, u + v.T), x, w)
        assert_same(got[0], x * w.T)
        assert_same(got[1], x + w.T)
        assert tiled(kernels) == [n > 1]   # with one row, w.T is a broadcast vector


def test_non_contiguous_inputs_and_strided_views_inside_the_kernel():
    for n, m in [(5, 7), (16, 32), (31, 17)]:
        a, g = data((n, 2 * m))[:, ::2], data((2 * m, n))
        (got,), kernels = run(lambda x, y: x / 2 + y[::2].T, a, g)
        assert_same(got, a / np.float32(2) + g[::2].T)
        assert tiled(kernels) == [True]


def test_single_row_and_single_column_shapes_need_no_tiles():
    for shape in [(1, 9), (9, 1), (1, 1)]:
        a, g = data(shape), data(shape[::-1])
        (got,), kernels = run(relu_backward, a, g)
        assert_same(got, np.where(a > 0, g.T, np.float32(0)))
        assert tiled(kernels) == [False] * len(kernels)


def test_plain_broadcast_and_reversed_kernels_keep_the_row_loop():
    a, row, col, g = data((16, 48)), data((48,)), data((16, 1)), data((16, 48))
    got, kernels = run(lambda x, r, c, y: (x * r + c, x - y.flip(1)), a, row, col, g)
    assert_same(got[0], a * row + col)
    assert_same(got[1], a - g[:, ::-1])
    assert not any(tiled(kernels))
    assert all("#pragma omp simd" in k.source for k in kernels)   # the row loop stays vectorisable


def test_tiled_kernels_are_shared_across_sizes():
    names = {run(relu_backward, data(s), data(s[::-1]))[1][0].name for s in [(5, 7), (64, 128)]}
    assert len(names) == 1


def test_compiled_relu_backward_in_a_training_step_matches_eager():
    x, w = fnx.tensor(data((32, 48))), fnx.tensor(data((48, 16)))

    def loss(w, x):
        return fnx.relu(x @ w).sum()

    got = fnx.compile(fnx.grad(loss))(w, x)
    assert np.allclose(got.numpy(), fnx.grad(loss)(w, x).numpy(), rtol=1e-6, atol=1e-6)
