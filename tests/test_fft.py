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


@pytest.mark.parametrize("name, ref", [
    ("hann_window", np.hanning), ("hamming_window", np.hamming), ("blackman_window", np.blackman),
    ("bartlett_window", np.bartlett), ("kaiser_window", lambda m: np.kaiser(m, 12.0)),
])
def test_windows_match_numpy_symmetric_and_periodic(name, ref):
    """numpy's windows are symmetric (periodic=False); the periodic one is the first n of the n + 1 symmetric,
    except that one sample is [1.] either way (PyTorch's)."""
    make = getattr(fnx, name)
    for n in (0, 1, 2, 7, 8):
        np.testing.assert_allclose(make(n, periodic=False, dtype=fnx.float64).numpy(), ref(n), atol=1e-12)
        want = ref(n + 1)[:n] if n != 1 else [1.0]
        np.testing.assert_allclose(make(n, dtype=fnx.float64).numpy(), want, atol=1e-12)
    assert make(4).dtype is fnx.float32 and make(4, requires_grad=True).requires_grad
    with pytest.raises(TypeError, match=f"{name} expects floating point dtypes"):
        make(4, dtype=fnx.int64)


def test_stft_then_istft_gives_the_signal_back():
    x = fnx.randn(2, 100, dtype=fnx.float64)
    window = fnx.hann_window(32, dtype=fnx.float64)
    spec = x.stft(32, hop_length=8, window=window, return_complex=True)
    assert spec.shape == (2, 17, 13) and spec.dtype is fnx.complex128
    np.testing.assert_allclose(spec.istft(32, hop_length=8, window=window, length=100).numpy(), x.numpy(),
                               atol=1e-12)
    real_view = fnx.stft(x[0], 32, hop_length=8, window=window, return_complex=False)
    np.testing.assert_array_equal(real_view.numpy(), fnx.view_as_real(spec[0]).numpy())


@pytest.mark.parametrize("call, match", [
    (lambda: fnx.stft(fnx.ones(20), 8, window=fnx.ones(8)), "return_complex parameter be given for real inputs"),
    (lambda: fnx.stft(fnx.ones(20), 8, window=fnx.ones(6), return_complex=True), "size equal to win_length=8"),
    (lambda: fnx.stft(fnx.ones(20), 8, hop_length=0, window=fnx.ones(8), return_complex=True), "hop_length > 0"),
    (lambda: fnx.stft(fnx.ones(6), 8, window=fnx.ones(8), center=False, return_complex=True), "0 < n_fft <= 6"),
    (lambda: fnx.stft(fnx.ones(2, 2, 9), 8, window=fnx.ones(8), return_complex=True), "a 1D or 2D tensor"),
    (lambda: fnx.istft(fnx.ones(5, 3), 8), "istft requires a complex-valued input"),
    (lambda: fnx.istft(fnx.ones(4, 3, dtype=fnx.complex64), 8), "n_fft / 2 \\+ 1 when onesided=True"),
    (lambda: fnx.istft(fnx.ones(5, 3, dtype=fnx.complex64), 8, hop_length=8, window=fnx.hann_window(8),
                       center=False), "window overlap add min"),
])
def test_stft_errors_name_the_argument(call, match):
    with pytest.raises(RuntimeError, match=match):
        call()


def test_stft_without_a_window_warns_as_pytorch_does():
    with pytest.warns(UserWarning, match="A window was not provided"):
        fnx.stft(fnx.ones(20), 8, return_complex=True)
