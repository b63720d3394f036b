"""fnx.lax: JAX's lax API. The op table (op_db_lax.py) checks values, gradients, vmap and compile; these tests
cover what the table cannot: traced start indices, JAX's argument forms, clamping, layouts and errors."""
import numpy as np
import pytest

import fnx
import fnx.lax as lax


def test_dynamic_slice_with_traced_starts_under_jit_grad_and_vmap():
    x = fnx.arange(24.0).reshape(2, 3, 4)
    want = x[:, :, 1:3].numpy()
    f = fnx.jit(lambda x, i: lax.dynamic_slice_in_dim(x, i, 2, axis=2))
    np.testing.assert_array_equal(f(x, fnx.tensor(1)).numpy(), want)
    g = fnx.grad(lambda x, i: lax.dynamic_slice_in_dim(x, i, 2, axis=2).sum())(x, fnx.tensor(1))
    assert g.numpy()[..., 1:3].all() and not g.numpy()[..., [0, 3]].any()
    rows = fnx.vmap(lambda i: lax.dynamic_slice(x[0, 0], (i,), (2,)))(fnx.tensor([0, 1, 3]))
    np.testing.assert_array_equal(rows.numpy(), [[0, 1], [1, 2], [2, 3]])   # 3 is clamped to 2, as in JAX


def test_dynamic_slice_takes_a_start_array_and_clamps():
    x = fnx.arange(10.0)
    assert lax.dynamic_slice(x, fnx.tensor([8]), (4,)).tolist() == [6.0, 7.0, 8.0, 9.0]
    assert lax.dynamic_slice(x, np.array([-3]), (2,)).tolist() == [0.0, 1.0]
    assert lax.dynamic_index_in_dim(x.reshape(2, 5), 1, keepdims=False).tolist() == [5.0, 6.0, 7.0, 8.0, 9.0]


def test_dynamic_update_slice_traced_start_under_jit_and_vmap():
    x = fnx.zeros(3, 4)
    f = fnx.jit(lambda x, i: lax.dynamic_update_slice(x, fnx.ones(2, 2), (i, 1)))
    want = np.zeros((3, 4))
    want[1:3, 1:3] = 1
    np.testing.assert_array_equal(f(x, fnx.tensor(5)).numpy(), want)   # 5 clamps to 1
    out = fnx.vmap(lambda v, i: lax.dynamic_update_index_in_dim(v, 7.0 * fnx.ones(()), i, 0))(x, fnx.tensor([0, 2, 3]))
    np.testing.assert_array_equal(out.numpy(), np.eye(4)[[0, 2, 3]] * 7)


def test_dynamic_update_slice_gradient_reaches_operand_and_update():
    x, u = fnx.ones(5, requires_grad=True), fnx.full((2,), 3.0, requires_grad=True)
    (lax.dynamic_update_slice(x, u, (fnx.tensor(1),)) ** 2).sum().backward()
    assert x.grad.tolist() == [2.0, 0.0, 0.0, 2.0, 2.0]
    assert u.grad.tolist() == [6.0, 6.0]


def test_dot_general_batch_and_contracting_dims():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 2, 4)), rng.standard_normal((4, 3, 5))
    out = lax.dot_general(fnx.tensor(a), fnx.tensor(b), (((2,), (0,)), ((0,), (1,))))
    np.testing.assert_allclose(out.numpy(), np.einsum("bik,kbj->bij", a, b), rtol=1e-12)
    assert lax.dot_general(fnx.ones(2, 3), fnx.ones(3), (((1,), (0,)), ((), ())),
                           preferred_element_type=fnx.float64).dtype is fnx.float64
    with pytest.raises(ValueError, match="contracting dims differ in size"):
        lax.dot_general(fnx.ones(2, 3), fnx.ones(4), (((1,), (0,)), ((), ())))


def test_conv_nhwc_same_padding_strided_and_feature_groups():
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((2, 7, 6, 4)), rng.standard_normal((3, 3, 2, 6))   # NHWC, HWIO, 2 groups
    y = lax.conv_general_dilated(fnx.tensor(x), fnx.tensor(w), (2, 2), "SAME",
                                 dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=2)
    assert tuple(y.shape) == (2, 4, 3, 6)    # ceil(7 / 2), ceil(6 / 2)
    padded = np.pad(x, ((0, 0), (1, 1), (0, 1), (0, 0)))   # SAME: (1, 1) and (0, 1), the odd one at the end
    ref = fnx.nn.functional.conv2d(fnx.tensor(padded).permute(0, 3, 1, 2), fnx.tensor(w).permute(3, 2, 0, 1),
                                   stride=2, groups=2)
    np.testing.assert_allclose(y.permute(0, 3, 1, 2).numpy(), ref.numpy(), rtol=1e-10)


def test_conv_shorthands_and_lhs_dilation_is_a_transposed_convolution():
    rng = np.random.default_rng(2)
    x, w = fnx.tensor(rng.standard_normal((1, 2, 4))), fnx.tensor(rng.standard_normal((3, 2, 3)))
    np.testing.assert_allclose(lax.conv(x, w, (1,), "VALID").numpy(),
                               fnx.nn.functional.conv1d(x, w).numpy(), rtol=1e-12)
    y = lax.conv_with_general_padding(x, w, (1,), [(2, 2)], lhs_dilation=(2,), rhs_dilation=None)
    wt = fnx.flip(w, (2,)).permute(1, 0, 2)
    ref = fnx.nn.functional.conv_transpose1d(x, wt, stride=2)
    np.testing.assert_allclose(y.numpy(), ref.numpy()[..., :y.shape[-1]], rtol=1e-10)


def test_padtype_to_pads_matches_jax():
    assert lax.padtype_to_pads((5, 6), (3, 2), (2, 1), "SAME") == [(1, 1), (0, 1)]
    assert lax.padtype_to_pads((5,), (4,), (1,), "SAME_LOWER") == [(2, 1)]
    assert lax.padtype_to_pads((5,), (3,), (1,), "valid") == [(0, 0)]
    with pytest.raises(ValueError, match="unknown padding 'FULL'"):
        lax.padtype_to_pads((5,), (3,), (1,), "FULL")


def test_conv_errors_name_what_is_unsupported():
    x, w = fnx.ones(1, 1, 2, 2, 2, 2), fnx.ones(1, 1, 1, 1, 1, 1)
    with pytest.raises(NotImplementedError, match="1 to 3 spatial dims"):
        lax.conv_general_dilated(x, w, (1, 1, 1, 1), "VALID")
    with pytest.raises(ValueError, match="layout strings"):
        lax.conv_general_dilated(fnx.ones(1, 1, 3), fnx.ones(1, 1, 1), (1,), "VALID", dimension_numbers=("NC", "OI", "NC"))


def test_reduce_window_pools_and_any_computation_folds():
    x = fnx.arange(16.0).reshape(1, 4, 4, 1)
    mx = lax.reduce_window(x, -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    assert mx.reshape(-1).tolist() == [5.0, 7.0, 13.0, 15.0]
    folded = lax.reduce_window(x, 1.0, lambda a, b: a + b, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    summed = lax.reduce_window(x, 1.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    assert folded.reshape(-1).tolist() == summed.reshape(-1).tolist() == [11.0, 19.0, 43.0, 51.0]
    dilated = lax.reduce_window(fnx.arange(3.0), 0.0, lax.add, (2,), (1,), "VALID", base_dilation=(2,))
    assert dilated.tolist() == [0.0, 1.0, 1.0, 2.0]
    with pytest.raises(NotImplementedError, match="variadic"):
        lax.reduce_window((x, x), (0.0, 0.0), lax.add, (1,), (1,), "VALID")


@pytest.mark.parametrize("n", [1, 2, 5, 8, 13])
def test_associative_scan_matches_cumsum_for_odd_and_even_lengths(n):
    x = fnx.arange(1.0, n + 1.0)
    assert lax.associative_scan(lax.add, x).tolist() == np.cumsum(np.arange(1.0, n + 1)).tolist()
    rev = lax.associative_scan(lax.add, x, reverse=True)
    assert rev.tolist() == np.cumsum(np.arange(1.0, n + 1)[::-1])[::-1].tolist()


def test_associative_scan_over_a_pytree_along_an_axis_compiles():
    x = fnx.arange(12.0).reshape(3, 4)
    f = fnx.jit(lambda x: lax.associative_scan(lambda a, b: {"s": a["s"] + b["s"]}, {"s": x}, axis=1)["s"])
    np.testing.assert_array_equal(f(x).numpy(), np.cumsum(np.arange(12.0).reshape(3, 4), axis=1))


def test_control_flow_takes_numpy_and_python_numbers_as_jax_does():
    carry, ys = lax.scan(lambda c, x: (c + x, c), 0.0, np.arange(4.0), unroll=4)
    assert float(carry) == 6.0 and ys.tolist() == [0.0, 0.0, 1.0, 3.0]
    assert int(lax.fori_loop(0, 5, lambda i, v: v + i, 0)) == 10
    assert int(lax.while_loop(lambda v: v < 10, lambda v: v * 2, 1)) == 16
    assert float(lax.switch(5, [lambda v: v, lambda v: v * 10.0], fnx.tensor(2.0))) == 20.0   # index clamped
    assert float(lax.cond(False, lambda v: v, lambda v: -v, 3.0)) == -3.0
    with pytest.raises(ValueError, match="unroll must be a positive int"):
        lax.scan(lambda c, x: (c, x), 0.0, np.arange(2.0), unroll=0)


def test_a_zero_length_scan_stacks_empty_ys_as_jax_does():
    carry, ys = lax.scan(lambda c, x: (c + x.sum(), {"y": x * 2, "n": c}), fnx.tensor(1.0), fnx.zeros(0, 3))
    assert float(carry) == 1.0 and tuple(ys["y"].shape) == (0, 3) and tuple(ys["n"].shape) == (0,)
    assert lax.scan(lambda c, x: (c, None), 0.0, fnx.zeros(0))[1] is None


def test_map_with_and_without_batch_size():
    xs = fnx.arange(7.0)
    assert lax.map(lambda v: v * v, xs).tolist() == (np.arange(7.0) ** 2).tolist()
    assert lax.map(lambda v: v * v, xs, batch_size=3).tolist() == (np.arange(7.0) ** 2).tolist()
    out = fnx.jit(lambda t: lax.map(lambda p: p["a"] + p["b"], t, batch_size=2))({"a": xs, "b": xs})
    assert out.tolist() == (2 * np.arange(7.0)).tolist()


def test_elementwise_semantics_that_differ_from_numpy():
    assert lax.div(fnx.tensor([-7, 7]), fnx.tensor([2, 2])).tolist() == [-3, 3]       # truncates, as C
    assert lax.rem(fnx.tensor([-7.0, 7.0]), 2.0).tolist() == [-1.0, 1.0]              # sign of the dividend
    assert lax.round(fnx.tensor([0.5, -2.5, 1.4])).tolist() == [1.0, -3.0, 1.0]        # away from zero
    assert lax.round(fnx.tensor([0.5, 2.5]), lax.RoundingMethod.TO_NEAREST_EVEN).tolist() == [0.0, 2.0]
    assert lax.integer_pow(fnx.tensor([2.0, -3.0]), 3).tolist() == [8.0, -27.0]
    assert lax.clamp(0.0, fnx.tensor([-1.0, 0.5, 2.0]), 1.0).tolist() == [0.0, 0.5, 1.0]
    assert lax.convert_element_type(fnx.tensor([1.7, -1.7]), np.int32).tolist() == [1, -1]
    assert lax.cbrt(fnx.tensor([-8.0, 27.0])).numpy() == pytest.approx([-2.0, 3.0])
    assert lax.lgamma(fnx.tensor([4.0])).item() == pytest.approx(np.log(6.0))
    assert lax.digamma(1.0).item() == pytest.approx(-0.5772156649, rel=1e-6)
    assert lax.erf(lax.erf_inv(fnx.tensor([0.5]))).item() == pytest.approx(0.5, rel=1e-6)
    with pytest.raises(TypeError, match="pred must be a bool array"):
        lax.select(fnx.tensor([1.0]), fnx.ones(1), fnx.zeros(1))
    with pytest.raises(TypeError, match="must be a Python int"):
        lax.integer_pow(fnx.ones(2), 2.0)


def test_shape_functions_with_explicit_dimensions():
    x = fnx.arange(6.0).reshape(2, 3)
    assert lax.reshape(x, (3, 2), dimensions=(1, 0)).tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    assert tuple(lax.broadcast(x, (4,)).shape) == (4, 2, 3)
    assert tuple(lax.expand_dims(x, (0, 3)).shape) == (1, 2, 3, 1)
    assert tuple(lax.squeeze(fnx.ones(1, 2, 1), (0, 2)).shape) == (2,)
    assert lax.rev(x, (1,)).tolist() == [[2.0, 1.0, 0.0], [5.0, 4.0, 3.0]]
    assert lax.iota(np.int32, 3).tolist() == [0, 1, 2] and lax.iota("float32", 2).dtype is fnx.float32
    assert lax.slice(x, (0, 1), (2, 3), (1, 2)).tolist() == [[1.0], [4.0]]
    assert lax.slice_in_dim(x, -2, None, axis=1).tolist() == [[1.0, 2.0], [4.0, 5.0]]
    assert tuple(lax.collapse(fnx.ones(2, 3, 4), 1).shape) == (2, 12)
    assert lax.full((2,), 3, np.float32).tolist() == [3.0, 3.0] and lax.full((1,), 2.5).dtype is fnx.float32
    assert lax.full_like(fnx.ones(2, dtype=fnx.int32), 7).tolist() == [7, 7]
    assert tuple(lax.full_like(x, 0.0, shape=(4,)).shape) == (4,)
    with pytest.raises(ValueError, match="broadcast_in_dim"):
        lax.broadcast_in_dim(x, (2, 4), (0, 1))


def test_reductions_keep_the_operand_dtype_and_sort_top_k():
    x = fnx.tensor([[3, 1, 2], [0, 5, 4]], dtype=fnx.int32)
    assert lax.reduce_sum(x, (1,)).dtype is fnx.int32 and lax.reduce_sum(x, (0, 1)).item() == 15
    assert lax.reduce_max(x, (0,)).tolist() == [3, 5, 4] and lax.reduce_min(x, (1,)).tolist() == [1, 0]
    assert lax.argmax(x, 1, np.int32).tolist() == [0, 1]
    assert lax.cumsum(x, 1, reverse=True).tolist() == [[6, 3, 2], [9, 9, 4]]
    keys, vals = lax.sort_key_val(fnx.tensor([3.0, 1.0, 2.0]), fnx.tensor([30, 10, 20]))
    assert keys.tolist() == [1.0, 2.0, 3.0] and vals.tolist() == [10, 20, 30]
    v, i = lax.top_k(fnx.tensor([[1.0, 5.0, 3.0]]), 2)
    assert v.tolist() == [[5.0, 3.0]] and i.tolist() == [[1, 2]] and i.dtype is fnx.int32


def test_a_jax_style_convnet_step_under_jit_of_grad_matches_eager():
    """conv_general_dilated (NHWC), reduce_window pooling, jax.nn functions and scipy's logsumexp, composed as
    a JAX program composes them: jit(value_and_grad) equals the eager values and gradients."""
    from fnx.scipy.special import logsumexp

    rng = np.random.default_rng(3)
    params = {"w": fnx.tensor(rng.standard_normal((3, 3, 1, 4)).astype(np.float32) * 0.3),
              "d": fnx.tensor(rng.standard_normal((16, 3)).astype(np.float32) * 0.3)}
    x = fnx.tensor(rng.standard_normal((5, 8, 8, 1)).astype(np.float32))
    labels = fnx.nn.one_hot(fnx.tensor([0, 1, 2, 1, 0]), 3)

    def loss(p, x, y):
        h = lax.conv_general_dilated(x, p["w"], (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        h = lax.reduce_window(fnx.nn.relu(h), -np.inf, lax.max, (1, 4, 4, 1), (1, 4, 4, 1), "VALID")
        logits = lax.dot_general(h.reshape(h.shape[0], 16), p["d"], (((1,), (0,)), ((), ())))
        return -(logits * y).sum(1).mean() + logsumexp(logits, axis=1).mean()

    eager_value, eager_grads = fnx.value_and_grad(loss)(params, x, labels)
    value, grads = fnx.jit(fnx.value_and_grad(loss))(params, x, labels)
    assert float(value) == pytest.approx(float(eager_value), rel=1e-5)
    for k in params:
        np.testing.assert_allclose(grads[k].numpy(), eager_grads[k].numpy(), rtol=1e-4, atol=1e-6)
    per_example = fnx.vmap(lambda xi, yi: loss(params, xi[None], yi[None]))(x, labels)
    assert float(per_example.mean()) == pytest.approx(float(eager_value), rel=1e-5)


@pytest.mark.parametrize("padding,k,s", [("VALID", 3, 2), ("SAME", 3, 2), ("SAME", 2, 3), ("VALID", 2, 3)])
def test_conv_transpose_output_sizes_follow_jax(padding, k, s):
    y = lax.conv_transpose(fnx.ones(1, 5, 2), fnx.ones(k, 2, 3), (s,), padding, dimension_numbers=("NWC", "WIO", "NWC"))
    assert tuple(y.shape) == (1, 5 * s + (max(k - s, 0) if padding == "VALID" else 0), 3)


def test_conv_transpose_with_transposed_kernel_is_pytorchs_conv_transpose():
    rng = np.random.default_rng(4)
    x, w = fnx.tensor(rng.standard_normal((2, 3, 5))), fnx.tensor(rng.standard_normal((3, 4, 3)))   # OIW of a conv
    y = lax.conv_transpose(x, w, (2,), "VALID", transpose_kernel=True)
    np.testing.assert_allclose(y.numpy(), fnx.nn.functional.conv_transpose1d(x, w, stride=2).numpy(), rtol=1e-10)
