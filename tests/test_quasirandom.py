"""fnx.quasirandom.SobolEngine (torch.quasirandom): PyTorch's unscrambled points bit for bit (recorded from
torch 2.13, which SciPy's qmc.Sobol(scramble=False, bits=30) gives too), the packaged direction-number table
against SciPy's, and scrambled points' distribution and net property."""
from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fnx
from fnx import quasirandom
from fnx.quasirandom import SobolEngine, _initial_numbers

_spec = importlib.util.spec_from_file_location(
    "sobol_table", pathlib.Path(__file__).resolve().parent.parent / "tools" / "sobol_table.py")
sobol_table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sobol_table)


def _ints(x: fnx.Tensor) -> list:
    """float64 points as the 30-bit integers they are."""
    return (x.numpy() * 2 ** 30).astype(np.int64).tolist()


# ---------------------------------------------------------------- PyTorch's numbers (torch 2.13)
def test_unscrambled_points_are_pytorchs():
    assert _ints(SobolEngine(5).draw(8, dtype=fnx.float64)) == [
        [0, 0, 0, 0, 0], [536870912] * 5, [805306368, 268435456, 268435456, 268435456, 805306368],
        [268435456, 805306368, 805306368, 805306368, 268435456],
        [402653184, 402653184, 671088640, 939524096, 402653184],
        [939524096, 939524096, 134217728, 402653184, 939524096],
        [671088640, 134217728, 939524096, 671088640, 671088640],
        [134217728, 671088640, 402653184, 134217728, 134217728]]
    big = SobolEngine(SobolEngine.MAXDIM)
    first = big.draw(4, dtype=fnx.float64)
    assert _ints(first[:, -4:]) == [[0, 0, 0, 0], [536870912] * 4, [805306368, 268435456, 805306368, 805306368],
                                    [268435456, 805306368, 268435456, 268435456]]
    assert _ints(first[:, 1000:1003]) == [[0, 0, 0], [536870912] * 3, [268435456, 268435456, 805306368],
                                          [805306368, 805306368, 268435456]]
    big.reset().fast_forward(1000)
    later = big.draw(2, dtype=fnx.float64)
    assert _ints(later[:, -3:]) == [[982515712, 1016070144, 89128960], [445644800, 479199232, 625999872]]
    assert int((later.numpy() * 2 ** 30).astype(np.int64).sum()) == 22792063942656


def test_float32_points_round_the_30_bit_integers_as_pytorch():
    e = SobolEngine(3)
    e.draw(3)
    e.fast_forward(100)
    assert e.draw(3).numpy().view(np.uint32).tolist() == [
        [1042808832, 1057095680, 1019215872], [1047003136, 1055129600, 1058406400],
        [1060765696, 1064435712, 1034944512]]
    assert SobolEngine(3).fast_forward(123456).draw(2).numpy().view(np.uint32).tolist() == [
        [1020858368, 1044062720, 1050497280], [1057409152, 1060030592, 1062119552]]


def test_draw_base2_reset_state_and_out():
    e = SobolEngine(2)
    assert e.draw_base2(2).tolist() == [[0.0, 0.0], [0.5, 0.5], [0.75, 0.25], [0.25, 0.75]]
    with pytest.raises(ValueError, match=r"4 points have been previously generated, then: n=4\+2\*\*1=6"):
        e.draw_base2(1)
    assert e.draw_base2(2).tolist() == [[0.375, 0.375], [0.875, 0.875], [0.625, 0.125], [0.125, 0.625]]
    assert e.reset().draw(1).tolist() == [[0.0, 0.0]] and e.num_generated == 1
    e = SobolEngine(2)
    assert e.sobolstate[:, :4].tolist() == [[536870912, 268435456, 134217728, 67108864],
                                            [536870912, 805306368, 671088640, 1006632960]]
    assert e.quasi.tolist() == [0, 0] and e.shift.tolist() == [0, 0] and e.sobolstate.dtype is fnx.int64
    e.draw(3)
    assert e.quasi.tolist() == [805306368, 268435456]
    out = fnx.empty(0)
    assert e.draw(2, out=out) is out and out.tolist() == [[0.25, 0.75], [0.375, 0.375]]
    assert repr(SobolEngine(3, scramble=True, seed=4)) == "SobolEngine(dimension=3, scramble=True, seed=4)"


def test_bad_input():
    for bad in (0, SobolEngine.MAXDIM + 1):
        with pytest.raises(ValueError, match=r"Supported range of dimensionality for SobolEngine is \[1, 21201\]"):
            SobolEngine(bad)
    with pytest.raises(NotImplementedError, match="dtype float16 is not supported"):
        SobolEngine(2).draw(2, dtype=fnx.float16)
    with pytest.raises(ValueError, match="n must be >= 0"):
        SobolEngine(2).draw(-1)
    with pytest.raises(ValueError, match="n must be >= 0"):
        SobolEngine(2).fast_forward(-1)
    with pytest.raises(RuntimeError, match="has 2\\*\\*30 points"):
        SobolEngine(2).fast_forward(2 ** 30).draw(1)


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 40), st.lists(st.integers(0, 9), min_size=1, max_size=4), st.integers(0, 3000))
def test_pieces_and_fast_forward_give_the_same_points_as_one_draw(dim, pieces, skip):
    whole = SobolEngine(dim).draw(skip + sum(pieces), dtype=fnx.float64).numpy()
    e = SobolEngine(dim).fast_forward(skip)
    parts = [e.draw(n, dtype=fnx.float64).numpy() for n in pieces]
    np.testing.assert_array_equal(np.concatenate(parts), whole[skip:])


# ---------------------------------------------------------------- the packaged table
def test_packaged_direction_numbers_are_scipys():
    poly, degree, vinit = _initial_numbers()
    scipy_poly, scipy_vinit = sobol_table.scipy_table()
    np.testing.assert_array_equal(poly, scipy_poly)
    used = np.arange(vinit.shape[1])[None, :] < degree[:, None]
    np.testing.assert_array_equal(vinit[used], scipy_vinit[used])
    assert len(poly) == SobolEngine.MAXDIM


# ---------------------------------------------------------------- scrambled: distribution only
def test_scrambled_points_keep_the_net_property_and_are_seeded():
    m, dim = 8, 20
    x = SobolEngine(dim, scramble=True, seed=3).draw_base2(m, dtype=fnx.float64).numpy()
    assert ((x >= 0) & (x < 1)).all()
    cells = np.floor(x * 2 ** m).astype(int)   # each dimension: one point per interval [k/2**m, (k+1)/2**m)
    assert all(sorted(cells[:, d]) == list(range(2 ** m)) for d in range(dim))
    np.testing.assert_allclose(x.mean(0), 0.5, atol=2.0 ** -m)
    np.testing.assert_array_equal(SobolEngine(dim, scramble=True, seed=3).draw_base2(m, dtype=fnx.float64).numpy(), x)
    other = SobolEngine(dim, scramble=True, seed=4).draw_base2(m, dtype=fnx.float64).numpy()
    assert not np.array_equal(other, x)
    assert not np.array_equal(x, SobolEngine(dim).draw_base2(m, dtype=fnx.float64).numpy())
    shift = SobolEngine(dim, scramble=True, seed=3).shift.numpy()   # the first point: the shift in float32, as PyTorch
    np.testing.assert_array_equal(x[0], shift.astype(np.float32) / np.float32(2 ** 30))


def test_scrambled_2d_projection_is_a_net():
    """Scrambling keeps Sobol's (0, m, 2)-net property of the first two dimensions: 2**m points put one point in
    each elementary box of area 2**-m, here of shape 2**-a by 2**-(m - a)."""
    m = 6
    x = SobolEngine(2, scramble=True, seed=11).draw_base2(m, dtype=fnx.float64).numpy()
    for a in range(m + 1):
        boxes = set(zip(np.floor(x[:, 0] * 2 ** a).astype(int), np.floor(x[:, 1] * 2 ** (m - a)).astype(int)))
        assert len(boxes) == 2 ** m


def test_scrambling_is_pytorchs_given_pytorchs_random_bits(monkeypatch):
    """With the bits torch.Generator().manual_seed(5) draws fed in place of fnx's, the scrambled engine gives
    torch 2.13's SobolEngine(2, scramble=True, seed=5) points exactly."""
    shift_bits = np.array([515708045, 125905764])
    ltm_rows = np.array([
        [133132919, 371764054, 229217184, 588567706, 457219169, 1000220664, 680848412, 460467941, 930568511, 884900907,
         771624752, 113426695, 380232664, 274552134, 116065966, 1066019903, 796892454, 702832512, 588826284, 947625818,
         77012760, 575788256, 252126878, 945281509, 594372127, 986895033, 309739918, 20777846, 113451337, 961137875],
        [854381585, 745624260, 1041872929, 400864540, 1038668490, 498585786, 88362992, 49876522, 468206162, 368492122,
         743198041, 148653605, 649606428, 415271088, 350413703, 171127716, 612313554, 888914532, 488518449, 203758841,
         1030990767, 148096159, 1004271037, 65120705, 883154526, 42409168, 745410583, 1067915972, 449412766,
         213936625]])
    draws = iter([(shift_bits[..., None] >> np.arange(30)) & 1, (ltm_rows[..., None] >> np.arange(30)) & 1])
    monkeypatch.setattr(quasirandom, "randint", lambda high, size, generator: fnx.tensor(next(draws)))
    e = SobolEngine(2, scramble=True, seed=5)
    assert _ints(e.draw(6, dtype=fnx.float64)) == [
        [515708032, 125905760], [1019827454, 797811885], [687648851, 351373390], [176746528, 1023215495],
        [40704204, 418864096], [538532031, 821810217]]
    assert e.reset().draw(6).numpy().view(np.uint32).tolist() == [
        [1056303268, 1039148396], [1064510804, 1061041811], [1059320513, 1051167810], [1042845442, 1064563742],
        [1025197619, 1053276895], [1056990563, 1061416785]]
