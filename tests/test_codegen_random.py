"""Random numbers inside fused kernels: fnx.random's Threefry-2x32 as a C and CUDA expression of the key words and
the element's position, and bool temporaries that keep float loops vectorisable.

The compiled bits must be the eager bits exactly (the same counters, split at the same half of the position
space), so these tests compare bit for bit: against eager `fnx.random` for a key passed in, and against the
interpret backend for the global-generator samplers (dropout) that fnx.compile feeds with a fresh key per call.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fnx
import fnx.nn.functional as F
from fnx import random as R
from fnx.lowering.codegen import render_module
from fnx.lowering.plan import build_executable, plan_steps

from test_codegen_cuda import _nvcc, needs_nvcc

KEYS = [0, 1, 42, 2 ** 32 - 1, 2 ** 64 - 1, 0x123456789ABCDEF0]
# 0-d, one value, odd sizes (the second half one shorter), both sides of the split, more than one CPU thread's share
SHAPES = [(), (1,), (2,), (3,), (7,), (4, 5), (3, 1, 5), (2, 3, 4), (65537,), (3, 32768)]


def _kernels(f, *args) -> list:
    return plan_steps(fnx.make_jaxpr(f)(*args), "c")[1]


def _exe(f, *args):
    return build_executable(fnx.make_jaxpr(f)(*args), backend="c")


def _equal(got, want) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes(), "not bit for bit"


# ---------------------------------------------------------------- fnx.random with a key: bit for bit
@pytest.mark.parametrize("seed", KEYS)
def test_compiled_random_bits_and_uniforms_are_the_eager_bits(seed):
    key = R.key(seed)
    for shape in SHAPES:
        draws = lambda k: [R.bits(k, shape), R.uniform(k, shape), R.uniform(k, shape, dtype=fnx.float64)]
        exe = _exe(draws, key)
        assert len(exe.kernels()) == 1   # one kernel draws all three, no bits array in between
        assert not any(op.startswith("random") for op in _library_ops(draws, key))
        for got, want in zip(exe(key), draws(key)):
            _equal(got.numpy(), want.numpy())


def _library_ops(f, *args) -> list[str]:
    """Names of the primitives that run as library steps (not in a kernel)."""
    steps, _ = plan_steps(fnx.make_jaxpr(f)(*args), "c")
    return [s.prim.name for s in steps if hasattr(s, "prim")]


def test_empty_draws_stay_library_steps():
    key = R.key(3)
    for shape in [(0,), (2, 0), (0, 5)]:
        draws = lambda k: [R.bits(k, shape), R.uniform(k, shape)]
        assert _kernels(draws, key) == []
        for got, want in zip(_exe(draws, key)(key), draws(key)):
            _equal(got.numpy(), want.numpy())


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2 ** 64 - 1), shape=st.lists(st.integers(1, 9), max_size=3).map(tuple),
       data=st.data())
def test_random_values_read_through_views_are_the_eager_values(seed, shape, data):
    """Transposed, reversed and sliced reads of a draw fuse (each position is hashed once) and read the right
    elements; a broadcast read would hash each counter repeatedly, so that draw is materialised instead."""
    key = R.key(seed)
    perm = tuple(data.draw(st.permutations(range(len(shape))), label="perm"))

    def f(k):
        u = R.uniform(k, shape)
        b = R.bits(k, shape + (2,))
        return [u.permute(perm) * 2.0, u.flip(tuple(range(len(shape)))), b[..., 1] - b[..., 0]]

    exe = _exe(f, key)
    assert "random_uniform" not in _library_ops(f, key) and "random_bits" not in _library_ops(f, key)
    for got, want in zip(exe(key), f(key)):
        _equal(got.numpy(), want.numpy())


def test_broadcast_reads_materialise_the_draw():
    key, x = R.key(5), fnx.randn(6, 5)
    f = lambda k, x: x * R.uniform(k, (6, 1))
    assert len(_kernels(f, key, x)) == 2   # the draw, then the product reading it
    _equal(_exe(f, key, x)(key, x)[0].numpy(), f(key, x).numpy())


def test_batched_keys_stay_library_steps():
    keys = R.split(R.key(9), 3)
    f = lambda ks: fnx.vmap(lambda k: R.uniform(k, (4, 5)))(ks) + 1.0
    assert "random_uniform" in _library_ops(f, keys)
    _equal(_exe(f, keys)(keys)[0].numpy(), f(keys).numpy())


def test_random_values_inside_reduction_kernels():
    """A draw consumed by row and by column reductions (the kernel's index space is not the draw's own order)."""
    key, x = R.key(11), fnx.randn(40, 300)
    f = lambda k, x: [(x * R.uniform(k, (40, 300))).sum(1), (x * R.uniform(k, (40, 300))).sum(0),
                      F.softmax(x + R.uniform(k, (40, 300), dtype=fnx.float32), -1)]
    assert "random_uniform" not in _library_ops(f, key, x)
    got, want = _exe(f, key, x)(key, x), f(key, x)
    # The sums add 300 (and 40) terms of magnitude ~0.4 in an order set by the CPU's vector width, so where one
    # cancels to near 0 they differ by a few ulps of the terms' total (~100), not of the result.
    for g, w, atol in zip(got, want, (2e-5, 2e-5, 1e-6)):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=2e-6, atol=atol)


# ---------------------------------------------------------------- dropout under fnx.compile: one kernel
def _seeded_call(f, backend: str, *args):
    fnx.manual_seed(123)
    out = fnx.compile(f, backend=backend)(*args)
    return [t.numpy() for t in (out if isinstance(out, (list, tuple)) else [out])]


@pytest.mark.parametrize("shape", [(7,), (64, 33), (1024, 512)])
def test_dropout_is_one_kernel_and_matches_the_interpreter_bit_for_bit(shape):
    x = fnx.randn(*shape)
    f = lambda x: F.dropout(fnx.relu(x), 0.1)
    fnx.manual_seed(123)
    lowered = fnx.compile(f).lower(x)
    assert len(lowered.kernels()) == 1
    assert "random_uniform" in lowered.kernels()[0].name
    for got, want in zip(_seeded_call(f, "c", x), _seeded_call(f, "interpret", x)):
        _equal(got, want)


def test_dropout_forward_and_backward_under_compile_match_the_interpreter():
    """value_and_grad of a dropout: the mask is hashed again in the backward kernel, from the same key."""
    x, w = fnx.randn(16, 40), fnx.randn(40, 40)
    f = fnx.value_and_grad(lambda x, w: (F.dropout(fnx.relu(x @ w), 0.25) ** 2).sum(), argnums=(0, 1))
    flat = lambda x, w: (lambda v, g: [v, *g])(*f(x, w))
    fnx.manual_seed(123)
    steps, _ = plan_steps(fnx.compile(flat).lower(x, w).jaxpr, "c")
    assert [s.prim.name for s in steps if hasattr(s, "prim") and s.prim.name.startswith("random")] == ["random_fold_in"]
    for got, want in zip(_seeded_call(flat, "c", x, w), _seeded_call(flat, "interpret", x, w)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- bool temporaries
def test_bool_temporaries_are_int_and_bool_storage_stays_one_byte():
    """Comparisons feeding float math are `int` temporaries (gcc then vectorises the loop: a char lane among
    float lanes has no vector type); bool buffers are still one byte each."""
    x = fnx.randn(64, 33)
    f = lambda x: [fnx.relu(x) * (x > 0.5), (x < 0.0) | (x > 1.0)]
    (gk,) = _kernels(f, x)
    temps = re.findall(r"const (\w+(?: \w+)?) v\d+ = ", gk.source)
    assert "unsigned char" not in temps and "int" in temps
    assert re.search(r"unsigned char \*restrict out\d", gk.source)
    exe = _exe(f, x)
    for got, want in zip(exe(x), f(x)):
        _equal(got.numpy(), want.numpy())


# ---------------------------------------------------------------- CUDA source
@needs_nvcc
def test_random_kernels_compile_with_nvcc(tmp_path):
    key, x = R.key(1), fnx.randn(64, 48)
    kernels = plan_steps(fnx.make_jaxpr(lambda k: [R.bits(k, (5, 7)), R.uniform(k, (1 << 15,)),
                                                   R.uniform(k, (3, 4), dtype=fnx.float64)])(key), "cuda")[1]
    kernels += plan_steps(fnx.make_jaxpr(lambda k, x: (x * R.uniform(k, (64, 48))).sum(1))(key, x), "cuda")[1]
    kernels += plan_steps(fnx.compile(lambda x: F.dropout(fnx.relu(x), 0.1)).lower(x).jaxpr, "cuda")[1]
    assert sum("fnx_random" in k.source for k in kernels) == len(kernels) >= 3
    _nvcc(render_module(kernels, "cuda"), tmp_path)


def test_threefry_rounds_of_the_prelude_are_fnx_randoms():
    """The prelude's rotations are the ones fnx/random.py hashes with (fnx/_threefry.py), so the two cannot drift
    apart."""
    from fnx._threefry import ROTATIONS
    from fnx.lowering.codegen import prelude

    source = prelude("c")
    rotations = [int(r) for r in re.findall(r"fnx_rotl32\(b, (\d+)u\)", source)]
    assert rotations == [r for i in range(5) for r in ROTATIONS[i % 2]]
