"""An MLP trained from scratch on scikit-learn's bundled digits, written in plain JAX.

It runs under real JAX (`python jax_mlp.py`) and, unmodified, on fnx (`python -m fnx run --jax jax_mlp.py`).
Two variants: plain SGD with the update written as a `tree_map` over the parameters, and Adam from
`jax.example_libraries.optimizers`. Prints each variant's test accuracy.
"""
import argparse

import numpy as np
from sklearn.datasets import load_digits

import jax
import jax.numpy as jnp
from jax import grad, jit, random, vmap
from jax.example_libraries import optimizers
from jax.tree_util import tree_map


def init_params(key, sizes):
    """(weights, biases) per layer; weights He-scaled normal, biases zero."""
    params = []
    keys = random.split(key, len(sizes) - 1)
    for k, n_in, n_out in zip(keys, sizes[:-1], sizes[1:]):
        params.append((random.normal(k, (n_in, n_out)) * jnp.sqrt(2.0 / n_in), jnp.zeros(n_out)))
    return params


def predict(params, image):
    """Log-probabilities of the ten classes for ONE image (a vector of 64 pixels)."""
    activations = image
    for w, b in params[:-1]:
        activations = jax.nn.relu(jnp.dot(activations, w) + b)
    w, b = params[-1]
    return jax.nn.log_softmax(jnp.dot(activations, w) + b)


batched_predict = vmap(predict, in_axes=(None, 0))   # per-example function, mapped over the batch


def loss(params, images, targets):
    return -jnp.mean(jnp.sum(batched_predict(params, images) * targets, axis=1))


def accuracy(params, images, labels):
    return jnp.mean(jnp.argmax(batched_predict(params, images), axis=1) == labels)


@jit
def sgd_step(params, images, targets, step_size):
    grads = grad(loss)(params, images, targets)
    return tree_map(lambda p, g: p - step_size * g, params, grads)


def batches(rng, n, batch_size):
    """Index arrays of the shuffled examples, batch_size at a time (the remainder is dropped)."""
    perm = rng.permutation(n)
    for i in range(n // batch_size):
        yield perm[i * batch_size:(i + 1) * batch_size]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    digits = load_digits()
    images = (digits.data / 16.0).astype(np.float32)
    labels = digits.target
    order = np.random.default_rng(0).permutation(len(images))
    train, test = order[:1400], order[1400:]
    train_images, test_images = images[train], jnp.asarray(images[test])
    train_targets = np.asarray(jax.nn.one_hot(labels[train], 10))
    test_labels = jnp.asarray(labels[test])

    key = random.PRNGKey(0)
    sgd_key, adam_key = random.split(key)
    sizes = [64, 128, 10]

    params = init_params(sgd_key, sizes)
    rng = np.random.default_rng(1)
    for epoch in range(args.epochs):
        for idx in batches(rng, len(train), args.batch_size):
            params = sgd_step(params, train_images[idx], train_targets[idx], 0.1)
    print(f"sgd: test accuracy {float(accuracy(params, test_images, test_labels)):.3f}")

    opt_init, opt_update, get_params = optimizers.adam(1e-3)

    @jit
    def adam_step(i, opt_state, images, targets):
        value, grads = jax.value_and_grad(loss)(get_params(opt_state), images, targets)
        return value, opt_update(i, grads, opt_state)

    opt_state = opt_init(init_params(adam_key, sizes))
    step = 0
    for epoch in range(args.epochs):
        for idx in batches(rng, len(train), args.batch_size):
            value, opt_state = adam_step(step, opt_state, train_images[idx], train_targets[idx])
            step += 1
    print(f"adam: final batch loss {float(value):.3f}, "
          f"test accuracy {float(accuracy(get_params(opt_state), test_images, test_labels)):.3f}")


if __name__ == "__main__":
    main()
