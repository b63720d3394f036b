"""Control flow, derivatives and pytrees in plain JAX: a `lax.scan` RNN and running statistics, `fori_loop`
with `x.at[i].set`, `lax.cond` under `vmap`, `value_and_grad(has_aux=True)`, `jacfwd`/`jacrev`/`hessian`,
samplers, a `static_argnums` jit, a registered pytree class fitted by gradient descent, and `jnp.linalg`.

It runs under real JAX (`python jax_control_flow.py`) and, unmodified, on fnx (`python -m fnx run --jax
jax_control_flow.py`). Prints one `name: value` line per result (the value a Python literal).
"""
import functools

import numpy as np

import jax
import jax.numpy as jnp
from jax import lax, random
from jax.scipy.special import logsumexp
from jax.scipy.stats import norm
from jax.tree_util import register_pytree_node_class, tree_map


def show(name, value):
    print(f"{name}: {np.asarray(value).tolist()}")


# ---- an Elman RNN over a sequence with lax.scan: h_t = tanh(W h_{t-1} + U x_t + b), y_t = v . h_t
def rnn(params, xs, h0):
    W, U, b, v = params

    def cell(h, x):
        h = jnp.tanh(W @ h + U @ x + b)
        return h, jnp.dot(v, h)

    return lax.scan(cell, h0, xs)


W = 0.5 * jnp.sin(jnp.arange(9.0)).reshape(3, 3)
U = 0.3 * jnp.cos(jnp.arange(6.0)).reshape(3, 2)
rnn_params = (W, U, jnp.array([0.1, -0.2, 0.0]), jnp.array([1.0, -1.0, 0.5]))
xs = jnp.stack([jnp.linspace(-1.0, 1.0, 7), jnp.linspace(0.5, -0.5, 7)], axis=1)   # (time, features)
h_last, ys = rnn(rnn_params, xs, jnp.zeros(3))
show("rnn last state", h_last)
show("rnn outputs", ys)
# its gradient through the scan, with respect to W
show("rnn grad W", jax.grad(lambda W_: jnp.sum(rnn((W_,) + rnn_params[1:], xs, jnp.zeros(3))[1] ** 2))(W))


# ---- running mean and maximum with scan over a carry that is a tuple
def running(carry, x):
    total, count, peak = carry
    total, count, peak = total + x, count + 1, jnp.maximum(peak, x)
    return (total, count, peak), (total / count, peak)


data = jnp.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0])
_, (means, peaks) = lax.scan(running, (0.0, 0, -jnp.inf), data)
show("running means", means)
show("running max", peaks)


# ---- fori_loop writing into an array with x.at[i].set: the Fibonacci numbers
def fibonacci(n):
    start = jnp.zeros(n, dtype=jnp.int32).at[1].set(1)
    return lax.fori_loop(2, n, lambda i, f: f.at[i].set(f[i - 1] + f[i - 2]), start)


show("fibonacci", fibonacci(12))

# power iteration for the largest eigenvalue, as a fori_loop over a (vector, estimate) carry
A = jnp.array([[4.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.0]])


def power_step(i, carry):
    vec, _ = carry
    w = A @ vec
    return w / jnp.linalg.norm(w), jnp.dot(vec, w)


_, top_eigenvalue = lax.fori_loop(0, 100, power_step, (jnp.ones(3) / jnp.sqrt(3.0), 0.0))
show("top eigenvalue", top_eigenvalue)

# ---- lax.cond per element under vmap: a piecewise function
piecewise = jax.vmap(lambda x: lax.cond(x > 0, lambda t: jnp.sin(t), lambda t: t ** 2, x))
show("piecewise", piecewise(jnp.array([-2.0, -0.5, 0.5, 2.0])))


# ---- least squares with value_and_grad(has_aux=True): the loss and its residuals
def least_squares(w, X, y):
    residuals = X @ w - y
    return jnp.mean(residuals ** 2), {"residuals": residuals}


X = jnp.array([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0], [1.0, 3.0]])
y = jnp.array([1.0, 3.0, 4.0, 8.0])
(value, aux), g = jax.value_and_grad(least_squares, has_aux=True)(jnp.array([0.5, 1.0]), X, y)
show("lsq loss", value)
show("lsq grad", g)
show("lsq residuals", aux["residuals"])


# ---- Jacobians and a Hessian
def field(x):
    return jnp.array([x[0] * x[1], jnp.sin(x[0]) + x[1] ** 3])


def energy(x):
    return jnp.sum(x ** 3) + x[0] * x[1]


point = jnp.array([0.5, -1.5])
show("jacfwd", jax.jacfwd(field)(point))
show("jacrev", jax.jacrev(field)(point))
show("hessian", jax.hessian(energy)(point))


# ---- samplers: moments and category frequencies
key = random.PRNGKey(42)
key, k_normal, k_uniform, k_cat = random.split(key, 4)
normals = random.normal(k_normal, (20000,))
uniforms = random.uniform(k_uniform, (20000,), minval=-1.0, maxval=3.0)
logits = jnp.log(jnp.array([0.2, 0.5, 0.3]))
draws = random.categorical(k_cat, logits, shape=(20000,))
show("normal mean std", [jnp.mean(normals), jnp.std(normals)])
show("uniform min mean max", [jnp.min(uniforms), jnp.mean(uniforms), jnp.max(uniforms)])
show("categorical frequencies", jnp.stack([jnp.mean(draws == c) for c in range(3)]))


# ---- jit with a static argument: a Python loop unrolled for each n
@functools.partial(jax.jit, static_argnums=(1,))
def power(x, n):
    result = jnp.ones_like(x)
    for _ in range(n):
        result = result * x
    return result


show("power", [power(jnp.array(1.5), 3), power(jnp.array(1.5), 4)])


# ---- a registered pytree class, fitted by gradient descent on a Gaussian log-likelihood
@register_pytree_node_class
class Gaussian:
    def __init__(self, mu, log_sigma):
        self.mu, self.log_sigma = mu, log_sigma

    def tree_flatten(self):
        return (self.mu, self.log_sigma), None

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        return cls(*children)


def negative_log_likelihood(model, samples):
    return -jnp.mean(norm.logpdf(samples, model.mu, jnp.exp(model.log_sigma)))


@jax.jit
def fit_step(model, samples):
    grads = jax.grad(negative_log_likelihood)(model, samples)
    return tree_map(lambda p, g: p - 0.1 * g, model, grads)


samples = jnp.array([2.1, 1.7, 2.6, 3.0, 1.2, 2.4, 2.9, 1.9])
model = Gaussian(jnp.array(0.0), jnp.array(0.0))
for _ in range(500):
    model = fit_step(model, samples)
show("fitted mu sigma", [model.mu, jnp.exp(model.log_sigma)])


# ---- linear algebra: a Cholesky solve against jnp.linalg.solve, and logsumexp
S = A @ A.T + jnp.eye(3)
rhs = jnp.array([1.0, 2.0, 3.0])
L = jnp.linalg.cholesky(S)
z = jnp.linalg.solve(L, rhs)
show("cholesky solve", jnp.linalg.solve(L.T, z))
show("solve", jnp.linalg.solve(S, rhs))
show("logsumexp", logsumexp(jnp.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]), axis=1))
