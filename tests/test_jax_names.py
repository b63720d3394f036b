"""Every name issue 16 lists, reached as a JAX program reaches it (`import jax` under fnx's jax alias), on one
small case each whose expected value is worked out by hand from JAX's documented semantics.

All cases run in one fresh interpreter under `fnx.install_jax_alias()` (the alias changes the process's imports
for good); each case is then its own test, so a failure names the JAX name that is missing or wrong.
"""
from __future__ import annotations

import json
import math
import textwrap

import numpy as np
import pytest

from test_torch_alias import _python

# Helpers that cases use, defined in the aliased interpreter (a case is one expression).
SETUP = """
import functools
import numpy as np
import jax
import jax.numpy as jnp
import jax.numpy.linalg
from jax import lax, nn, random, tree_util
import jax.scipy.special, jax.scipy.stats, jax.scipy.linalg
from jax.example_libraries import optimizers, stax

import fnx
import fnx.example_libraries.stax

special, stats, sla = jax.scipy.special, jax.scipy.stats, jax.scipy.linalg


@tree_util.register_pytree_node_class
class Pair:
    def __init__(self, a, b):
        self.a, self.b = a, b

    def tree_flatten(self):
        return (self.a, self.b), "aux"

    @classmethod
    def tree_unflatten(cls, aux, children):
        assert aux == "aux"
        return cls(*children)


class Box:
    def __init__(self, v):
        self.v = v


tree_util.register_pytree_node(Box, lambda b: ((b.v,), None), lambda aux, c: Box(c[0]))


def one_step(make, grad=2.0, **kw):
    init, update, get_params = make
    state = update(0, jnp.array([grad]), init(jnp.array([1.0])))
    return get_params(state)


def conv_ones():
    lhs, rhs = jnp.ones((1, 1, 3, 3)), jnp.ones((1, 1, 2, 2))
    return lax.conv_general_dilated(lhs, rhs, (1, 1), "VALID")


def dense_apply():
    init_fun, apply_fun = stax.serial(stax.Dense(4), stax.Relu, stax.Dense(2))
    out_shape, params = init_fun(random.PRNGKey(0), (-1, 3))
    w1, b1 = params[0]
    return [list(out_shape), list(w1.shape), list(b1.shape), list(apply_fun(params, jnp.ones((5, 3))).shape)]


def cho(b):
    c = sla.cho_factor(jnp.array([[4.0, 2.0], [2.0, 3.0]]))
    return sla.cho_solve(c, b)
"""

S2 = math.sqrt(2.0)
EULER = 0.5772156649015329  # -digamma(1)
_PDF = [math.exp(-v * v / 2) / math.sqrt(2 * math.pi) for v in (-1.0, 0.5)]
_CDF = [0.5 * (1 + math.erf(v / S2)) for v in (-1.0, 0.5)]
TRUNCATED_MEAN = round((_PDF[0] - _PDF[1]) / (_CDF[1] - _CDF[0]), 2)   # -0.21

# (name as a JAX program spells it, expression using it, expected value[, expected dtype])
CASES = [
    # jax.numpy: creation, JAX's default dtypes (float32 / int32 without x64)
    ("jnp.array", "jnp.array([1, 2, 3])", [1, 2, 3], "int32"),
    ("jnp.asarray", "jnp.asarray(np.array([0.5, 1.5]))", [0.5, 1.5], "float32"),
    ("jnp.zeros", "jnp.zeros((2, 1))", [[0.0], [0.0]], "float32"),
    ("jnp.ones", "jnp.ones(2, dtype=jnp.int32)", [1, 1], "int32"),
    ("jnp.full", "jnp.full((2,), 7)", [7, 7], "int32"),
    ("jnp.arange", "jnp.arange(0, 1, 0.25)", [0.0, 0.25, 0.5, 0.75], "float32"),
    ("jnp.linspace", "jnp.linspace(0, 1, 5)", [0.0, 0.25, 0.5, 0.75, 1.0], "float32"),
    ("jnp.eye", "jnp.eye(2, 3, k=1)", [[0, 1, 0], [0, 0, 1]], "float32"),
    ("jnp.zeros_like", "jnp.zeros_like(jnp.arange(3))", [0, 0, 0], "int32"),
    ("jnp.ones_like", "jnp.ones_like(jnp.arange(2.0))", [1.0, 1.0], "float32"),
    ("jnp.full_like", "jnp.full_like(jnp.arange(2), 5)", [5, 5], "int32"),
    # elementwise and reductions with axis= / keepdims= / where=
    ("jnp.sum", "jnp.sum(jnp.array([[1, 2], [3, 4]]), axis=0, keepdims=True)", [[4, 6]], "int32"),
    ("jnp.mean", "jnp.mean(jnp.array([1.0, 2.0, 9.0]), where=jnp.array([True, True, False]))", 1.5),
    ("jnp.max", "jnp.max(jnp.array([[1, 5], [7, 2]]), axis=1)", [5, 7]),
    ("jnp.argmax", "jnp.argmax(jnp.array([[1, 5], [7, 2]]), axis=1)", [1, 0], "int32"),
    ("jnp.exp", "jnp.exp(jnp.array([0.0, 1.0]))", [1.0, math.e]),
    ("jnp.maximum", "jnp.maximum(jnp.array([1, 4]), 2)", [2, 4], "int32"),
    ("jnp.std", "jnp.std(jnp.array([1.0, 3.0]))", 1.0),
    ("jnp.var", "jnp.var(jnp.array([1.0, 3.0]), ddof=1)", 2.0),
    ("jnp.cumsum", "jnp.cumsum(jnp.array([1, 2, 3]))", [1, 3, 6]),
    ("jnp.prod", "jnp.prod(jnp.array([[1, 2], [3, 4]]), axis=1)", [2, 12]),
    ("jnp.all", "jnp.all(jnp.array([[True, False], [True, True]]), axis=1)", [False, True]),
    # products
    ("jnp.dot", "jnp.dot(jnp.array([[1.0, 2.0], [3.0, 4.0]]), jnp.array([5.0, 6.0]))", [17.0, 39.0]),
    ("jnp.matmul", "jnp.matmul(jnp.ones((2, 3, 4)), jnp.ones((4, 1))).shape", [2, 3, 1]),
    ("jnp.einsum", "jnp.einsum('ij,j->i', jnp.array([[1.0, 2.0], [3.0, 4.0]]), jnp.array([1.0, 1.0]))", [3.0, 7.0]),
    ("jnp.tensordot", "jnp.tensordot(jnp.ones((2, 3)), jnp.ones((3, 4)), axes=1)", [[3.0] * 4] * 2),
    ("jnp.outer", "jnp.outer(jnp.array([1, 2]), jnp.array([3, 4]))", [[3, 4], [6, 8]]),
    ("jnp.inner", "jnp.inner(jnp.array([1.0, 2.0, 3.0]), jnp.array([4.0, 5.0, 6.0]))", 32.0),
    # shape functions
    ("jnp.reshape", "jnp.reshape(jnp.arange(6), (3, -1))", [[0, 1], [2, 3], [4, 5]]),
    ("jnp.transpose", "jnp.transpose(jnp.arange(6).reshape(2, 3), (1, 0))", [[0, 3], [1, 4], [2, 5]]),
    ("jnp.swapaxes", "jnp.swapaxes(jnp.zeros((2, 3, 4)), 0, 2).shape", [4, 3, 2]),
    ("jnp.moveaxis", "jnp.moveaxis(jnp.zeros((2, 3, 4)), 0, -1).shape", [3, 4, 2]),
    ("jnp.expand_dims", "jnp.expand_dims(jnp.zeros((2, 3)), (0, 3)).shape", [1, 2, 3, 1]),
    ("jnp.squeeze", "jnp.squeeze(jnp.zeros((1, 2, 1)), axis=0).shape", [2, 1]),
    ("jnp.concatenate", "jnp.concatenate([jnp.array([[1], [2]]), jnp.array([[3], [4]])], axis=1)", [[1, 3], [2, 4]]),
    ("jnp.stack", "jnp.stack([jnp.array([1, 2]), jnp.array([3, 4])], axis=1)", [[1, 3], [2, 4]]),
    ("jnp.split", "jnp.split(jnp.arange(6), [2, 5])", [[0, 1], [2, 3, 4], [5]]),
    ("jnp.tile", "jnp.tile(jnp.array([1, 2]), 2)", [1, 2, 1, 2]),
    ("jnp.repeat", "jnp.repeat(jnp.array([1, 2]), 2)", [1, 1, 2, 2]),
    ("jnp.pad", "jnp.pad(jnp.array([1, 2]), (1, 2))", [0, 1, 2, 0, 0]),
    ("jnp.where", "jnp.where(jnp.array([True, False]), jnp.array([1, 2]), jnp.array([3, 4]))", [1, 4]),
    ("jnp.take", "jnp.take(jnp.array([[1, 2], [3, 4]]), jnp.array([1, 0]), axis=1)", [[2, 1], [4, 3]]),
    ("jnp.take_along_axis", "jnp.take_along_axis(jnp.array([[10, 30, 20]]), jnp.array([[1, 2, 0]]), axis=1)",
     [[30, 20, 10]]),
    ("jnp.unique", "jnp.unique(jnp.array([3, 1, 3, 2]), return_counts=True)", [[1, 2, 3], [1, 1, 2]]),
    ("jnp.unique size= under jit", "jax.jit(lambda x: jnp.unique(x, size=4, fill_value=0))(jnp.array([3, 1, 3]))",
     [1, 3, 0, 0]),
    ("jnp.isin", "jnp.isin(jnp.array([1, 2, 3]), jnp.array([3, 1]))", [True, False, True]),
    # linalg
    ("jnp.linalg.norm", "jnp.linalg.norm(jnp.array([3.0, 4.0]))", 5.0),
    ("jnp.linalg.solve", "jnp.linalg.solve(jnp.array([[2.0, 0.0], [0.0, 4.0]]), jnp.array([2.0, 4.0]))", [1.0, 1.0]),
    ("jnp.linalg.inv", "jnp.linalg.inv(jnp.array([[2.0, 0.0], [0.0, 4.0]]))", [[0.5, 0.0], [0.0, 0.25]]),
    ("jnp.linalg.cholesky", "jnp.linalg.cholesky(jnp.array([[4.0, 2.0], [2.0, 3.0]]))", [[2.0, 0.0], [1.0, S2]]),
    ("jnp.linalg.svd", "jnp.linalg.svd(jnp.array([[0.0, 3.0], [1.0, 0.0]]), compute_uv=False)", [3.0, 1.0]),
    ("jnp.linalg.eigh", "jnp.linalg.eigh(jnp.array([[2.0, 1.0], [1.0, 2.0]]))[0]", [1.0, 3.0]),
    ("jnp.linalg.qr", "(lambda q, r: q @ r)(*jnp.linalg.qr(jnp.array([[1.0, 2.0], [3.0, 4.0]])))",
     [[1.0, 2.0], [3.0, 4.0]]),
    ("jnp.linalg.det", "jnp.linalg.det(jnp.array([[1.0, 2.0], [3.0, 4.0]]))", -2.0),
    ("jnp.linalg.slogdet", "list(jnp.linalg.slogdet(jnp.array([[1.0, 2.0], [3.0, 4.0]])))", [-1.0, math.log(2.0)]),
    # constants and dtypes
    ("jnp.inf", "jnp.inf == float('inf')", True),
    ("jnp.nan", "jnp.nan != jnp.nan", True),
    ("jnp.pi", "jnp.pi", math.pi),
    ("jnp.e", "jnp.e", math.e),
    ("jnp.newaxis", "jnp.arange(3)[:, jnp.newaxis].shape", [3, 1]),
    ("jnp.float32", "jnp.float32(1.5)", 1.5, "float32"),
    ("jnp.int32", "jnp.arange(3.0).astype(jnp.int32)", [0, 1, 2], "int32"),
    ("jnp.dtype", "jnp.dtype('float32') == jnp.float32", True),
    ("jnp.result_type", "jnp.result_type(jnp.int8, jnp.uint8) == jnp.int16", True),
    # immutable updates
    ("x.at[].set", "jnp.array([1, 2, 3]).at[1].set(9)", [1, 9, 3]),
    ("x.at[].add", "jnp.array([1, 2, 3]).at[jnp.array([0, 0])].add(1)", [3, 2, 3]),  # repeated indices accumulate
    ("x.at[].multiply", "jnp.array([1.0, 2.0, 3.0]).at[1:].multiply(2.0)", [1.0, 4.0, 6.0]),
    ("x.at[].min", "jnp.array([1, 5, 3]).at[:].min(2)", [1, 2, 2]),
    ("x.at[].max", "jnp.array([1, 5, 3]).at[:].max(2)", [2, 5, 3]),
    ("x.at[].get", "jnp.array([1, 2, 3]).at[2].get()", 3),
    ("x.at[].set mode='drop'", "jnp.array([1, 2, 3]).at[jnp.array([5, 0])].set(9, mode='drop')", [9, 2, 3]),
    ("x.at[] under grad", "jax.grad(lambda x: jnp.zeros(3).at[1].set(x * x).sum())(3.0)", 6.0),
    # jax.lax
    ("lax.cond", "lax.cond(True, lambda x: x + 1.0, lambda x: x - 1.0, 1.0)", 2.0),
    ("lax.switch", "lax.switch(5, [lambda x: x, lambda x: x * 2.0, lambda x: x * 3.0], 1.0)", 3.0),  # index clamps
    ("lax.while_loop", "lax.while_loop(lambda c: c < 10, lambda c: c * 2, 1)", 16),
    ("lax.fori_loop", "lax.fori_loop(0, 5, lambda i, acc: acc + i, 0)", 10),
    ("lax.fori_loop traced bound", "jax.jit(lambda n: lax.fori_loop(0, n, lambda i, acc: acc + i, 0))(5)", 10,
     "int32"),   # the index has the bounds' dtype, so an int32 loop state stays int32
    ("lax.scan", "lax.scan(lambda c, x: (c + x, c * x), 0, jnp.array([1, 2, 3]))", [6, [0, 2, 9]]),
    ("lax.map", "lax.map(lambda x: x * 2, jnp.arange(3))", [0, 2, 4]),
    ("lax.select", "lax.select(jnp.array([True, False]), jnp.array([1, 2]), jnp.array([3, 4]))", [1, 4]),
    ("lax.stop_gradient", "jax.grad(lambda x: x * lax.stop_gradient(x))(3.0)", 3.0),
    ("lax.dynamic_slice", "lax.dynamic_slice(jnp.arange(5), (4,), (2,))", [3, 4]),  # the start clamps
    ("lax.dynamic_update_slice", "lax.dynamic_update_slice(jnp.zeros(5), jnp.ones(2), (1,))", [0, 1, 1, 0, 0]),
    ("lax.dynamic_slice_in_dim", "lax.dynamic_slice_in_dim(jnp.arange(6).reshape(3, 2), 1, 2, axis=0)",
     [[2, 3], [4, 5]]),
    ("lax.dot_general", "lax.dot_general(jnp.ones((2, 3, 4)), jnp.ones((2, 4, 5)), (((2,), (1,)), ((0,), (0,))))"
     ".shape", [2, 3, 5]),
    ("lax.conv_general_dilated", "conv_ones()", [[[[4.0, 4.0], [4.0, 4.0]]]]),
    ("lax.padtype_to_pads", "[list(p) for p in lax.padtype_to_pads((5,), (3,), (2,), 'SAME')]", [[1, 1]]),
    ("lax.conv_with_general_padding", "lax.conv_with_general_padding(jnp.ones((1, 1, 3)), jnp.ones((1, 1, 2)), (1,),"
     " [(1, 1)], None, None)", [[[1.0, 2.0, 2.0, 1.0]]]),
    ("lax.reduce_window", "lax.reduce_window(jnp.array([1.0, 2.0, 3.0, 4.0]), 0.0, lax.add, (2,), (1,), 'VALID')",
     [3.0, 5.0, 7.0]),
    ("lax.rsqrt", "lax.rsqrt(4.0)", 0.5),
    ("lax.logistic", "lax.logistic(0.0)", 0.5),
    ("lax.erf", "lax.erf(0.5)", 0.5204998778130465),
    ("lax.lgamma", "lax.lgamma(5.0)", math.log(24.0)),
    ("lax.digamma", "lax.digamma(1.0)", -EULER),
    ("lax.associative_scan", "lax.associative_scan(jnp.add, jnp.array([1, 2, 3, 4]))", [1, 3, 6, 10]),
    # jax.tree_util
    ("tree_util.tree_map", "tree_util.tree_map(lambda a, b: a + b, {'x': 1, 'y': (2,)}, {'x': 10, 'y': (20,)})",
     {"x": 11, "y": [22]}),
    ("tree_util.tree_flatten", "tree_util.tree_flatten({'b': 1, 'a': 2})[0]", [2, 1]),  # dict leaves in key order
    ("tree_util.tree_leaves", "tree_util.tree_leaves([1, None, (2, {'k': 3})])", [1, 2, 3]),  # None has no leaves
    ("tree_util.tree_unflatten", "tree_util.tree_unflatten(tree_util.tree_structure((0, [0])), [5, 6])", [5, [6]]),
    ("tree_util.tree_structure", "tree_util.tree_structure({'a': (1, 2), 'b': 3}).num_leaves", 3),
    ("tree_util.register_pytree_node", "tree_util.tree_map(lambda v: v * 2, Box(4)).v", 8),
    ("tree_util.register_pytree_node_class", "(lambda p: [p.a, p.b])(tree_util.tree_map(lambda v: -v, Pair(1, 2)))",
     [-1, -2]),
    ("jax.tree.reduce", "jax.tree.reduce(lambda a, b: a * b, {'a': 2, 'b': (3, 4)})", 24),
    ("jax.tree.all", "[jax.tree.all([True, (True,)]), jax.tree.all([True, (False,)])]", [True, False]),
    ("tree_util.Partial", "[tree_util.Partial(lambda a, b: a - b, 5)(2), "
     "tree_util.tree_leaves(tree_util.Partial(lambda a, b: a - b, 5))]", [3, [5]]),
    # jax.scipy
    ("scipy.special.logsumexp", "special.logsumexp(jnp.array([0.0, math.log(3.0)]))", math.log(4.0)),
    ("scipy.special.logsumexp b=", "special.logsumexp(jnp.array([0.0, 0.0]), b=jnp.array([1.0, 3.0]))",
     math.log(4.0)),
    ("scipy.special.erf", "special.erf(jnp.array(0.5))", 0.5204998778130465),
    ("scipy.special.erfc", "special.erfc(jnp.array(0.5))", 1 - 0.5204998778130465),
    ("scipy.special.erfinv", "special.erfinv(jnp.array(0.5204998778130465))", 0.5),
    ("scipy.special.gammaln", "special.gammaln(jnp.array(5.0))", math.log(24.0)),
    ("scipy.special.digamma", "special.digamma(jnp.array(1.0))", -EULER),
    ("scipy.special.expit", "special.expit(jnp.array(0.0))", 0.5),
    ("scipy.special.logit", "special.logit(jnp.array(0.75))", math.log(3.0)),
    ("scipy.special.xlogy", "special.xlogy(jnp.array([0.0, 2.0]), jnp.array([0.0, math.e]))", [0.0, 2.0]),
    ("scipy.special.betainc", "special.betainc(2.0, 3.0, jnp.array([0.0, 0.3, 1.0]))",  # sum of binomial terms
     [0.0, 6 * 0.3**2 * 0.7**2 + 4 * 0.3**3 * 0.7 + 0.3**4, 1.0]),
    ("scipy.stats.norm.logpdf", "stats.norm.logpdf(jnp.array(1.0), 1.0, 2.0)", -0.5 * math.log(2 * math.pi * 4)),
    ("scipy.stats.norm.logcdf", "stats.norm.logcdf(jnp.array(0.0))", math.log(0.5)),
    ("scipy.stats.multivariate_normal.logpdf", "stats.multivariate_normal.logpdf(jnp.zeros(2), jnp.zeros(2), "
     "jnp.array([[2.0, 0.0], [0.0, 2.0]]))", -math.log(2 * math.pi * 2)),
    ("scipy.stats.bernoulli.logpmf", "stats.bernoulli.logpmf(jnp.array([1, 0]), 0.25)",
     [math.log(0.25), math.log(0.75)]),
    ("scipy.stats.beta.logpdf", "stats.beta.logpdf(jnp.array(0.5), 2.0, 2.0)", math.log(1.5)),
    ("scipy.stats.beta.logcdf", "stats.beta.logcdf(jnp.array(0.5), 2.0, 2.0)", math.log(0.5)),
    ("scipy.stats.beta.cdf", "stats.beta.cdf(jnp.array([-1.0, 0.5, 2.0]), 2.0, 2.0)", [0.0, 0.5, 1.0]),
    ("scipy.linalg.cho_factor+cho_solve", "cho(jnp.array([4.0, 2.0]))", [1.0, 0.0]),
    ("scipy.linalg.solve_triangular", "sla.solve_triangular(jnp.array([[2.0, 0.0], [1.0, 1.0]]), "
     "jnp.array([2.0, 3.0]), lower=True)", [1.0, 2.0]),
    # jax.nn
    ("nn.relu", "nn.relu(jnp.array([-1.0, 2.0]))", [0.0, 2.0]),
    # numpy operands of JAX's functions convert as jnp.asarray converts them: float64 narrows to float32
    ("nn.relu of numpy", "nn.relu(np.array([-1.0, 2.0]))", [0.0, 2.0], "float32"),
    ("lax.max of numpy", "lax.max(np.array([1.0, 5.0]), np.array([3.0, 2.0]))", [3.0, 5.0], "float32"),
    ("scipy.special.logsumexp of numpy", "special.logsumexp(np.zeros(4))", math.log(4.0), "float32"),
    # JAX's gelu defaults to the tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    ("nn.gelu", "nn.gelu(jnp.array(1.0))", 0.5 * (1 + math.tanh(math.sqrt(2 / math.pi) * 1.044715))),
    ("nn.gelu approximate=False", "nn.gelu(jnp.array(1.0), approximate=False)", 0.5 * (1 + math.erf(1 / S2))),
    ("nn.softmax", "nn.softmax(jnp.array([[0.0, math.log(3.0)]]), axis=-1)", [[0.25, 0.75]]),
    ("nn.log_softmax", "nn.log_softmax(jnp.array([0.0, math.log(3.0)]))", [math.log(0.25), math.log(0.75)]),
    ("nn.sigmoid", "nn.sigmoid(jnp.array(0.0))", 0.5),
    ("nn.silu", "nn.silu(jnp.array(1.0))", 1 / (1 + math.exp(-1))),
    ("nn.one_hot", "nn.one_hot(jnp.array([0, 2, -1]), 3)", [[1, 0, 0], [0, 0, 1], [0, 0, 0]], "float32"),
    ("nn.logsumexp", "nn.logsumexp(jnp.array([[0.0, math.log(3.0)]]), axis=1)", [math.log(4.0)]),
    ("nn.hard_sigmoid", "nn.hard_sigmoid(jnp.array([-4.0, 0.0, 4.0]))", [0.0, 0.5, 1.0]),
    ("nn.hard_silu", "nn.hard_silu(jnp.array(1.0))", 4 / 6),
    ("nn.mish", "nn.mish(jnp.array(1.0))", math.tanh(math.log1p(math.e))),
    ("nn.squareplus", "nn.squareplus(jnp.array([0.0, 3.0]), b=16)", [2.0, (3 + 5) / 2]),
    # one query, two keys at equal scores: the mean of the values; masking the second key leaves the first
    ("nn.dot_product_attention", "nn.dot_product_attention(jnp.ones((1, 1, 1, 2)), jnp.zeros((1, 2, 1, 2)), "
     "jnp.array([[[[1.0, 0.0]], [[0.0, 1.0]]]]))", [[[[0.5, 0.5]]]]),
    ("nn.dot_product_attention mask=", "nn.dot_product_attention(jnp.ones((1, 1, 1, 2)), jnp.zeros((1, 2, 1, 2)), "
     "jnp.array([[[[1.0, 0.0]], [[0.0, 1.0]]]]), mask=jnp.array([[[[True, False]]]]))", [[[[1.0, 0.0]]]]),
    # keys, samplers and devices
    ("random.PRNGKey", "random.PRNGKey(0).shape", [2]),
    # mean of the standard normal truncated to [a, b]: (pdf(a) - pdf(b)) / (cdf(b) - cdf(a))
    ("random.truncated_normal", "[round(float(f(random.truncated_normal(random.PRNGKey(1), -1.0, 0.5, (20000,)))), 2)"
     " for f in (jnp.min, jnp.max, jnp.mean)]", [-1.0, 0.5, TRUNCATED_MEAN]),
    # medians of |x| hand-computed from each CDF: ln 2, ln 2, ln 3, 1 (exponential, laplace, logistic, cauchy)
    ("random.exponential etc.", "[round(float(jnp.median(jnp.abs(f(random.PRNGKey(4), (40000,))))), 1) for f in "
     "(random.exponential, random.laplace, random.logistic, random.cauchy)]",
     [round(math.log(2), 1), round(math.log(2), 1), round(math.log(3), 1), 1.0]),
    ("random.rademacher", "sorted(set(random.rademacher(random.PRNGKey(5), (100,)).tolist()))", [-1, 1]),
    ("random.choice replace=False", "sorted(random.choice(random.PRNGKey(2), 6, (6,), replace=False).tolist())",
     [0, 1, 2, 3, 4, 5]),
    ("random.choice p=", "(lambda c: [round(float(jnp.mean(c == k)), 1) for k in range(3)])(random.choice("
     "random.PRNGKey(3), jnp.arange(3), (20000,), p=jnp.array([0.2, 0.5, 0.3])))", [0.2, 0.5, 0.3]),
    ("devices", "jax.devices()[0].type == 'cpu' and len(jax.devices('cpu')) == 1", True),
    ("device_put", "jax.device_put(np.array([1.0, 2.0]))", [1.0, 2.0], "float32"),
    ("block_until_ready", "jax.block_until_ready({'a': jnp.ones(2)})", {"a": [1.0, 1.0]}),
    # example_libraries: one step from x = 1 with gradient 2
    ("optimizers.sgd", "one_step(optimizers.sgd(0.1))", [0.8]),
    ("optimizers.momentum", "one_step(optimizers.momentum(0.1, 0.9))", [0.8]),
    # adam's first step moves by step_size * g / (|g| + eps) (bias-corrected moments)
    ("optimizers.adam", "one_step(optimizers.adam(0.1))", [1.0 - 0.1 * 2 / (2 + 1e-8)]),
    ("optimizers.exponential_decay", "optimizers.exponential_decay(1.0, 10, 0.5)(20)", 0.25),
    ("stax.serial+Dense+Relu", "dense_apply()", [[-1, 2], [3, 4], [4], [5, 2]]),
    # names no case above calls by their jax path: the alias gives fnx's object itself
    ("jax paths are fnx's", "[jnp.empty is fnx.numpy.empty, jnp.float64 is fnx.numpy.float64, jnp.bool_ is "
     "fnx.numpy.bool_, jnp.int64 is fnx.numpy.int64, random.split is fnx.random.split, tree_util.Partial is "
     "fnx.tree_util.Partial, jax.devices is fnx.devices, jax.block_until_ready is fnx.block_until_ready, "
     "random.PRNGKey is fnx.random.PRNGKey, stax.serial is fnx.example_libraries.stax.serial]", [True] * 10),
]


# Runs every case in the aliased interpreter and prints {name: result}, tensors as {"value", "dtype"}.
RUNNER = SETUP + """
import json, math, sys


def _plain(value):
    if hasattr(value, "tolist") and hasattr(value, "dtype"):
        return {"value": value.tolist(), "dtype": str(value.dtype).split(".")[-1]}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


out = {}
for name, expr in json.loads(sys.argv[1]):
    try:
        out[name] = _plain(eval(expr))
    except Exception as e:
        out[name] = {"error": f"{type(e).__name__}: {e}"}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    folder = tmp_path_factory.mktemp("jax_names")
    script = folder / "names.py"
    script.write_text(RUNNER)
    run = _python(["-m", "fnx", "run", "--jax", str(script), json.dumps([c[:2] for c in CASES])], cwd=folder)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.splitlines()[-1])


def _values(got):
    """`got` with tensors' dtypes dropped, for comparing values."""
    if isinstance(got, dict):
        return _values(got["value"]) if set(got) == {"value", "dtype"} else {k: _values(v) for k, v in got.items()}
    if isinstance(got, list):
        return [_values(v) for v in got]
    return got


def _same(got, want) -> bool:
    if isinstance(want, dict):
        return isinstance(got, dict) and got.keys() == want.keys() and all(_same(got[k], want[k]) for k in want)
    if isinstance(want, str) or isinstance(got, str):
        return got == want
    if isinstance(want, list) and any(isinstance(w, list) for w in want) and not _rectangular(want):
        return isinstance(got, list) and len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want))
    return np.shape(got) == np.shape(want) and np.allclose(got, want, rtol=1e-5, atol=1e-6)


def _rectangular(value) -> bool:
    try:
        np.asarray(value, dtype=float)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_jax_name_behaves_as_jax(case, results):
    name, _, want, *dtype = case
    got = results[name]
    assert not (isinstance(got, dict) and "error" in got), f"{name}: {got.get('error')}"
    assert _same(_values(got), want), f"{name}: got {got}, JAX gives {want}"
    if dtype:
        assert got["dtype"] == dtype[0], f"{name}: dtype {got['dtype']}, JAX gives {dtype[0]}"
