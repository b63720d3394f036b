"""fnx.fft beyond the op table (op_db_fft.py checks values, gradients, jvp, vmap and staging): dtypes, errors,
the convolution theorem, a spectral layer trained with complex weights, compile, and jnp.fft's conventions."""
import warnings

import numpy as np
import pytest

import fnx
import fnx.numpy as jnp


def test_dtypes_follow_pytorch():
    assert fnx.fft.fft(fnx.arange(4)).dtype is fnx.complex64            # integers: the default float's complex
    assert fnx.fft.fft(fnx.ones(4, dtype=fnx.float64)).dtype is fnx.complex128
    assert fnx.fft.rfft(fnx.ones(4)).dtype is fnx.complex64 and fnx.fft.rfft(fnx.ones(4)).shape == (3,)
    assert fnx.fft.irfft(fnx.ones(3, dtype=fnx.complex128)).dtype is fnx.float64
    assert fnx.fft.irfft(fnx.ones(3)).shape == (4,)                       # a real spectrum is read as complex
    assert fnx.fft.hfft(fnx.ones(3, dtype=fnx.complex64), 5).dtype is fnx.float32
    assert fnx.fft.ihfft(fnx.ones(5)).dtype is fnx.complex64
    assert fnx.fft.fftfreq(4, dtype=fnx.float64).dtype is fnx.float64
    with fnx.autocast("cpu"):
        assert fnx.fft.rfft(fnx.ones(4, dtype=fnx.bfloat16)).dtype is fnx.complex64


@pytest.mark.parametrize("call, error, match", [
    (lambda: fnx.fft.fft(fnx.ones(4), norm="unitary"), ValueError, "fft.fft: Invalid normalization mode: 'unitary'"),
    (lambda: fnx.fft.rfft(fnx.ones(4, dtype=fnx.complex64)), RuntimeError, "fft.rfft expects a real input"),
    (lambda: fnx.fft.fft2(fnx.ones(3, 4), dim=(0, -2)), RuntimeError, r"fft.fft2: FFT dims must be unique"),
    (lambda: fnx.fft.fft(fnx.ones(4), n=0), RuntimeError, r"Invalid number of data points \(0\)"),
    (lambda: fnx.fft.fft(fnx.ones(4), dim=1), IndexError, "fft.fft: dimension out of range"),
    (lambda: fnx.fft.fftn(fnx.ones(4), s=(2, 2)), RuntimeError, "shape with 2 values but input tensor only has 1"),
    (lambda: fnx.fft.fftn(fnx.ones(4, 4), s=(2, 2), dim=(0,)), RuntimeError, "dim and shape arguments must have"),
    (lambda: fnx.fft.irfft(fnx.ones(1, dtype=fnx.complex64)), RuntimeError, r"pass the signal's length n"),
    (lambda: fnx.fft.rfftn(fnx.ones(4), dim=()), RuntimeError, "fft.rfftn must transform at least one axis"),
    (lambda: fnx.fft.fft(fnx.ones(4, dtype=fnx.float16)), TypeError, r"float16.*\.float\(\)"),
    (lambda: fnx.fft.fft(fnx.ones(4), out=fnx.ones(4)), NotImplementedError, "fft.fft: out= is not supported"),
])
def test_bad_arguments_name_the_function_and_the_fix(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_frequencies_and_shifts_match_numpy():
    for n in (1, 2, 5, 8):
        np.testing.assert_allclose(fnx.fft.fftfreq(n, 0.1).numpy(), np.fft.fftfreq(n, 0.1), rtol=1e-6)
        np.testing.assert_allclose(fnx.fft.rfftfreq(n, 0.1).numpy(), np.fft.rfftfreq(n, 0.1), rtol=1e-6)
    x = np.arange(15.0).reshape(3, 5)
    np.testing.assert_array_equal(fnx.fft.fftshift(fnx.tensor(x)).numpy(), np.fft.fftshift(x))
    np.testing.assert_array_equal(fnx.fft.ifftshift(fnx.fft.fftshift(fnx.tensor(x), dim=1), dim=1).numpy(), x)
    assert fnx.fft.fftfreq(3, requires_grad=True).requires_grad


def test_convolution_theorem_gives_circular_convolution():
    rng = np.random.default_rng(0)
    x, k = rng.standard_normal((2, 9)), rng.standard_normal(9)
    direct = np.stack([sum(x[:, (i - j) % 9] * k[j] for j in range(9)) for i in range(9)], -1)
    spectral = fnx.fft.irfft(fnx.fft.rfft(fnx.tensor(x)) * fnx.fft.rfft(fnx.tensor(k)), n=9)
    np.testing.assert_allclose(spectral.numpy(), direct, atol=1e-12)


def test_spectral_layer_with_complex_weights_gradchecks_and_trains():
    """A Fourier neural operator's spectral convolution: rfft2, a complex einsum on the lowest modes, irfft2."""
    def layer(x, w):
        ft = fnx.fft.rfft2(x)
        out = fnx.zeros(x.shape[0], w.shape[1], x.shape[-2], x.shape[-1] // 2 + 1, dtype=w.dtype)
        out[:, :, :2, :2] = fnx.einsum("bixy,ioxy->boxy", ft[:, :, :2, :2], w)
        return fnx.fft.irfft2(out, s=tuple(x.shape[-2:]))

    fnx.manual_seed(0)
    x = fnx.randn(2, 3, 6, 5, dtype=fnx.float64)
    w = fnx.rand(3, 2, 2, 2, dtype=fnx.complex128, requires_grad=True)
    assert fnx.autograd.gradcheck(lambda w: layer(x, w), (w,))
    target = layer(x, fnx.rand(3, 2, 2, 2, dtype=fnx.complex128))
    opt = fnx.optim.Adam([w], lr=0.05)
    losses = []
    for _ in range(40):
        opt.zero_grad()
        loss = ((layer(x, w) - target) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.05 * losses[0]


def test_compile_runs_transforms_on_the_interpreter_and_matches_eager():
    def smooth(x):
        spectrum = fnx.fft.rfft(x)
        return fnx.fft.irfft(spectrum * fnx.exp(-fnx.fft.rfftfreq(x.shape[-1])), n=x.shape[-1]).sum(-1)

    x = fnx.randn(3, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # no complex arithmetic in the C kernels: interpreted
        got = fnx.compile(smooth)(x)
        grad = fnx.compile(fnx.grad(lambda x: smooth(x).sum()))(x)
    np.testing.assert_allclose(got.numpy(), smooth(x).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grad.numpy(), fnx.grad(lambda x: smooth(x).sum())(x).numpy(), rtol=1e-5, atol=1e-6)


def test_jnp_fft_takes_numpy_arguments_with_jax_dtypes():
    a = np.arange(12.0).reshape(3, 4)
    got = jnp.fft.fft2(a, axes=(0, 1), norm="ortho")
    assert got.dtype is fnx.complex64                                     # float64 narrows without x64
    np.testing.assert_allclose(got.numpy(), np.fft.fft2(a, norm="ortho"), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(jnp.fft.irfft(jnp.fft.rfft(a, axis=0), 3, axis=0).numpy(), a, atol=1e-5)
    assert jnp.fft.fftfreq(4).dtype is fnx.float32
    np.testing.assert_array_equal(jnp.fft.fftshift(jnp.arange(4), axes=0).numpy(), np.fft.fftshift(np.arange(4)))
