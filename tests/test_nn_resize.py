"""F.interpolate's bicubic and antialiased modes and F.grid_sample's bicubic mode against PyTorch 2.13's numbers
(recorded once; the op table checks them against loop references, gradients against finite differences),
their errors, nn.Upsample with them, and dropout's layout on channels_last inputs."""
import numpy as np
import pytest

import fnx
import fnx.nn.functional as F


def _x():
    """sin(1.3 k) on a (1, 1, 4, 5) grid, float64."""
    return fnx.sin(fnx.arange(20, dtype=fnx.float64) * 1.3).reshape(1, 1, 4, 5)


def _weights(n: int):
    """The cotangent cos(k) over n outputs (the recorded gradients are those of sum(y * cotangent))."""
    return fnx.cos(fnx.arange(n, dtype=fnx.float64))


# kwargs: (output size, PyTorch's output, PyTorch's input gradient), both flat
_TORCH_INTERPOLATE = {
    "bicubic_size": ({"size": (3, 7), "mode": "bicubic"}, [
        -0.046796, 0.62367913, 0.99799799, 0.49098308, -0.39337163, -0.90003177, -0.88155225, 0.26683058, 0.79800022,
        0.91658559, 0.21529981, -0.65145234, -0.91918295, -0.67391834, 0.55459662, 0.89498116, 0.74634007,
        -0.08124977, -0.84639596, -0.84924927, -0.40096998], [
        1.07729252, 0.05991223, -1.09212113, -0.40761391, 0.92536857, 0.72425657, -0.53326568, -0.92664332,
        0.23824764, 0.97496201, 0.47155013, -0.7717537, -0.74575352, 0.53432605, 0.89596444, -0.13701119,
        -1.08606918, -0.22291041, 1.01510056, 0.54576988]),
    "bicubic_align": ({"size": (3, 7), "mode": "bicubic", "align_corners": True}, [
        0.0, 0.70999988, 0.99641348, 0.51550137, -0.31210859, -0.88306819, -0.88345466, 0.32043231, 0.87434411,
        0.89075922, 0.21529981, -0.60495841, -0.94662631, -0.68940828, 0.60553987, 0.94229986, 0.68690686,
        -0.1086366, -0.83111706, -0.9058275, -0.41936092], [
        1.1404587, 0.21408151, -1.36034252, -0.33956748, 1.01216597, 0.4805417, -0.49972177, -0.74366173,
        0.43112205, 0.69623883, 0.4805417, -0.49972177, -0.74366173, 0.43112205, 0.69623883, -0.07189219,
        -1.32529819, -0.29331632, 1.29824098, 0.53603995]),
    "bicubic_recompute": ({"scale_factor": 1.6, "mode": "bicubic", "recompute_scale_factor": True}, [
        -0.10957665, 0.43675218, 0.98291845, 0.8408159, 0.14292173, -0.60776171, -0.89769073, -0.91427322,
        0.00535976, 0.51651993, 0.99515525, 0.77278666, 0.03465815, -0.68722928, -0.89485501, -0.84572841,
        0.19122286, 0.63702426, 0.99848123, 0.64993344, -0.14107156, -0.80442241, -0.87545578, -0.72083376,
        0.32122236, 0.71090571, 0.98062939, 0.54826271, -0.26478895, -0.87252426, -0.84372973, -0.61625485,
        0.49265878, 0.79346226, 0.92823819, 0.39167711, -0.42909262, -0.94250692, -0.7759309, -0.45371763,
        0.59358306, 0.83637269, 0.88635889, 0.2908848, -0.52625849, -0.97612065, -0.72608636, -0.34861194], [
        1.36673448, -1.32681613, -1.31015765, 1.4077808, 1.17702715, -1.64645593, 0.36658105, 1.6661304, -0.469544,
        -1.58845139, 1.51123586, 0.66681415, -1.60083235, -0.56788647, 1.5968908, -0.99018293, -1.55091166,
        1.12832016, 1.48118413, -1.20052866]),
    "bilinear_antialias": ({"size": (2, 3), "mode": "bilinear", "antialias": True}, [
        0.5077824, 0.25162085, -0.78759787, 0.68172852, 0.03048964, -0.71563459], [
        0.24489796, 0.23513083, 0.12864341, -0.02497777, -0.10191351, 0.16408225, 0.15376846, 0.07676693,
        -0.02836129, -0.07875741, -0.16081449, -0.16571019, -0.1127483, -0.01847648, 0.03549712, -0.24244714,
        -0.24408713, -0.15562943, -0.01015056, 0.06946829]),
    "bicubic_antialias": ({"size": (2, 3), "mode": "bicubic", "antialias": True}, [
        0.53651343, 0.31063626, -0.84819865, 0.74882301, 0.01450167, -0.76337365], [
        0.27954844, 0.29434912, 0.15821725, -0.0380292, -0.12788304, 0.19248711, 0.19832096, 0.09854385,
        -0.03867496, -0.09802401, -0.18666271, -0.2095433, -0.13666557, -0.01186181, 0.05565653, -0.27530495,
        -0.3025254, -0.18599165, 0.00120955, 0.09701531]),
    "bicubic_antialias_align": ({"size": (2, 3), "mode": "bicubic", "antialias": True, "align_corners": True}, [
        0.64640815, -0.21366449, -0.84912164, 0.74522983, -0.40580301, -0.62711109], [
        0.15150066, 0.18154568, 0.12925641, 0.03592976, -0.09843427, 0.15455476, 0.18415624, 0.12873596,
        0.03093385, -0.10925007, -0.02060204, -0.02917611, -0.03095002, -0.02935576, -0.02439331, -0.27704144,
        -0.34090165, -0.26293665, -0.11432469, 0.10493422]),
    "lanczos_antialias": ({"size": (2, 3), "mode": "lanczos", "antialias": True}, [
        0.56788181, 0.34931446, -0.90702801, 0.8053739, 0.00752292, -0.81267783], [
        0.28926374, 0.34498662, 0.17335964, -0.05514983, -0.13639557, 0.17737511, 0.20590115, 0.09291479,
        -0.05055862, -0.09544304, -0.17046776, -0.21633202, -0.13306881, -0.00614327, 0.05312796, -0.28475593,
        -0.35179392, -0.19956458, 0.01814557, 0.10878029]),
    "bicubic_antialias_up": ({"size": (5, 6), "mode": "bicubic", "antialias": True}, [
        -0.04516337, 0.77710686, 0.83230569, 0.02547192, -0.81036606, -0.89635173, 0.10877908, 0.84276242,
        0.75323555, -0.11599116, -0.86747074, -0.80823219, 0.29444024, 0.90201087, 0.63761974, -0.2862004,
        -0.9156367, -0.68016565, 0.46898077, 0.92719153, 0.49792185, -0.44560021, -0.92922023, -0.52641012,
        0.60201724, 0.9288021, 0.37357914, -0.56674236, -0.92131245, -0.38999715], [
        1.4900734, 0.43415841, -1.15365677, -1.25878229, 0.19898083, 1.41232592, 0.86939789, -0.74585934,
        -1.40253169, -0.32032273, 1.18884177, 1.20561917, -0.26816172, -1.39729884, -0.79622961, 0.83459774,
        1.42029038, 0.2474232, -1.24343442, -1.19684691]),
}


@pytest.mark.parametrize("case", list(_TORCH_INTERPOLATE))
def test_interpolate_bicubic_and_antialias_match_pytorch(case):
    kwargs, values, grads = _TORCH_INTERPOLATE[case]
    x = _x().requires_grad_()
    y = F.interpolate(x, **kwargs)
    (y * _weights(y.numel()).reshape(tuple(y.shape))).sum().backward()
    np.testing.assert_allclose(y.detach().numpy().reshape(-1), values, atol=1e-8)
    np.testing.assert_allclose(x.grad.numpy().reshape(-1), grads, atol=1e-8)


def test_antialias_upsampling_bilinear_is_the_plain_mode_and_float32_works():
    x = _x()
    np.testing.assert_allclose(F.interpolate(x, size=(7, 9), mode="bilinear", antialias=True).numpy(),
                               F.interpolate(x, size=(7, 9), mode="bilinear").numpy(), atol=1e-12)
    y = F.interpolate(x.float(), scale_factor=0.5, mode="bicubic", antialias=True)
    assert y.dtype == fnx.float32 and tuple(y.shape) == (1, 1, 2, 2)


def test_upsample_modules_with_bicubic_mode():
    x = _x()
    up = fnx.nn.Upsample(scale_factor=2, mode="bicubic", align_corners=True)
    assert repr(up) == "Upsample(scale_factor=2.0, mode='bicubic')"
    np.testing.assert_allclose(up(x).numpy(), F.interpolate(x, size=(8, 10), mode="bicubic",
                                                             align_corners=True).numpy(), atol=1e-12)
    np.testing.assert_allclose(fnx.nn.UpsamplingBilinear2d(size=(3, 7))(x).numpy(),
                               F.interpolate(x, size=(3, 7), mode="bilinear", align_corners=True).numpy())


def test_interpolate_errors_as_pytorch():
    x = fnx.ones(1, 1, 5, 5)
    with pytest.raises(ValueError, match="Anti-alias option is restricted to bilinear, bicubic, and lanczos"):
        F.interpolate(fnx.ones(1, 1, 5, 5, 5), size=3, mode="trilinear", antialias=True)
    with pytest.raises(ValueError, match="Lanczos mode requires antialias=True"):
        F.interpolate(x, size=3, mode="lanczos")
    with pytest.raises(ValueError, match="Lanczos mode does not support align_corners=True"):
        F.interpolate(x, size=3, mode="lanczos", antialias=True, align_corners=True)
    with pytest.raises(NotImplementedError, match=r"Only 3D, 4D and 5D input Tensors supported \(got 3D\).*"
                                                  r"\(got bicubic\)"):
        F.interpolate(fnx.ones(1, 1, 5), size=3, mode="bicubic")
    with pytest.raises(NotImplementedError, match=r"\(got cubic\)"):
        F.interpolate(x, size=3, mode="cubic")
    with pytest.raises(RuntimeError, match=r"sizes should be greater than 0, but got input \(H: 5, W: 5\) output "
                                           r"\(H: 0, W: 3\)"):
        F.interpolate(x, size=(0, 3), mode="bicubic")
    with pytest.raises(ValueError, match="recompute_scale_factor is not meaningful with an explicit size"):
        F.interpolate(x, size=3, mode="bicubic", recompute_scale_factor=True)
    with pytest.raises(NotImplementedError, match="mode 'bilinear' on uint8 input is not implemented in fnx"):
        F.interpolate(fnx.ones(1, 1, 5, 5, dtype=fnx.uint8), size=3, mode="bilinear")


# padding_mode, align_corners: PyTorch's output, input gradient and grid gradient (flat) for _x() sampled at
# _GRID with the cotangent cos(k)
_GRID = [[[[-1.2, -0.9], [-0.35, 0.2], [0.55, 1.15]], [[1.3, -0.4], [0.05, 0.75], [-0.8, 0.45]]]]
_TORCH_GRID_SAMPLE_BICUBIC = {
    ("zeros", False): (
        [0.0, 0.95593616, -0.15812089, 0.09016978, -0.28069364, 0.55783565],
        [0.00026177, -0.00352773, -0.00041848, 3.74e-05, 0.03406483, -0.03407737, 0.04638309, 0.00550229,
         -0.00049169, 0.08679353, 0.16627942, 0.51152059, 0.05958287, 0.00206329, -0.00725419, 0.13284058,
         0.01516725, -0.62688227, -0.13704787, -0.02877574],
        [-0.04446934, 0.0, -0.50673611, -0.09459339, -0.11260104, -0.73655169, -0.29755802, 0.07439908,
         2.14848477, -0.06570179, 0.54775821, 0.18871431]),
    ("border", True): (
        [-0.07738907, 0.8818339, -0.99659067, -0.77942497, -0.18441146, 0.73089625],
        [0.96795189, -0.10498878, -0.00423057, 0.00645762, -0.0870243, 0.12994881, 0.0602119, 0.07925048,
         0.06848287, -1.03901076, 0.0921063, 0.55403953, -0.13225131, -0.01126298, 0.06981167, 0.03202593,
         0.00205709, -0.40139142, -0.48324193, -0.03476051],
        [-0.1698601, 0.27143247, -0.63848645, -0.09515557, -0.09714119, 0.00332639, 0.01363651, -0.30770871,
         1.77036056, 0.17966873, 0.44676977, 0.05901556]),
    ("reflection", False): (
        [-0.0338814, 0.95593616, -0.87321181, -0.84643087, -0.28069364, 0.51423678],
        [1.15776177, -0.00352773, 0.00929195, -0.07225139, -0.21362955, -0.19157737, 0.04638309, 0.03443346,
         -0.21586824, -0.6364859, 0.16627942, 0.51152059, 0.05135663, 0.06057208, 0.10241323, 0.1124169,
         0.01516725, -0.58482056, -0.42400225, -0.16125186],
        [-1.85986766, 0.12907199, -0.50673611, -0.09459339, -0.73626759, 0.01771275, 0.59054791, -0.14602585,
         2.14848477, 0.20950862, 0.23868519, 0.10626531]),
    ("reflection", True): (
        [0.30819534, 0.8818339, -0.98936174, -0.92198387, -0.20799371, 0.67821511],
        [0.68801714, 0.32488597, -0.06340024, -0.05632177, -0.04041644, 0.01358145, 0.09967201, 0.17805802,
         -0.61293204, -0.4418495, 0.12253132, 0.51245703, -0.06121548, -0.05508764, 0.02429353, 0.04053854,
         0.00366922, -0.47714593, -0.40520857, -0.02994508],
        [-2.51878848, 0.119146, -0.63848645, -0.09515557, -0.1139201, -0.00363888, 0.27844951, -0.00012564,
         1.76540652, 0.19200023, 0.4700977, 0.08334919]),
}


@pytest.mark.parametrize("padding, align", list(_TORCH_GRID_SAMPLE_BICUBIC))
def test_grid_sample_bicubic_matches_pytorch(padding, align):
    values, input_grad, grid_grad = _TORCH_GRID_SAMPLE_BICUBIC[padding, align]
    x, grid = _x().requires_grad_(), fnx.tensor(_GRID, dtype=fnx.float64).requires_grad_()
    y = F.grid_sample(x, grid, mode="bicubic", padding_mode=padding, align_corners=align)
    (y * _weights(6).reshape(1, 1, 2, 3)).sum().backward()
    for got, want in ((y.detach(), values), (x.grad, input_grad), (grid.grad, grid_grad)):
        np.testing.assert_allclose(got.numpy().reshape(-1), want, atol=1e-8)


def test_grid_sample_bicubic_errors_and_non_finite_grid_values():
    with pytest.raises(RuntimeError, match="bicubic interpolation only supports 4D input"):
        F.grid_sample(fnx.ones(1, 1, 2, 2, 2), fnx.zeros(1, 1, 1, 1, 3), mode="bicubic")
    grid = fnx.tensor([[[[float("nan"), 0.0], [float("inf"), 0.0]]]])
    with np.errstate(invalid="ignore"):
        out = F.grid_sample(fnx.ones(1, 1, 3, 3), grid, mode="bicubic", padding_mode="border", align_corners=False)
    assert np.isnan(out.numpy()).all()    # as PyTorch: the cubic weights of a non-finite coordinate are NaN


def test_dropout_keeps_the_layout_of_its_input_as_pytorch():
    """PyTorch draws the mask laid out as the input (rand_like's preserve_format): a channels_last input gives a
    channels_last output, a transposed one a transposed output."""
    x = fnx.randn(2, 3, 8, 8).to(memory_format=fnx.channels_last)
    for y in (F.dropout(x), fnx.nn.Dropout(0.3)(x), F.dropout2d(x), F.alpha_dropout(x, 0.5, training=True),
              F.feature_alpha_dropout(x, 0.5, training=True), fnx.rand_like(x)):
        assert y.stride() == (192, 1, 24, 3)
    x3 = fnx.randn(2, 3, 4, 4, 4).to(memory_format=fnx.channels_last_3d)
    assert F.dropout3d(x3).stride() == F.dropout(x3).stride() == (192, 1, 48, 12, 3)
    assert F.dropout(fnx.randn(4, 5).t()).stride() == (1, 5)
    kept = F.dropout(x, 0.25)
    dropped = kept.numpy() == 0
    np.testing.assert_allclose(kept.numpy()[~dropped], x.numpy()[~dropped] / 0.75, rtol=1e-6)
