"""A classifier trained from scratch in the shape of JAX's own "MNIST from scratch" example, on scikit-learn's
bundled 8x8 digits (no download): numpy parameters and numpy batches passed straight into `jit`/`grad`
functions, a log-softmax through `logsumexp`, SGD as a list comprehension over `grad`'s pytree, plus
per-example gradients by `vmap(grad(...), in_axes=...)`, shuffling by a `random.split` chain and a
`tree_map` momentum step.

It runs under real JAX (`python jax_mnist_fromscratch.py`) and, unmodified, on fnx (`python -m fnx run --jax
jax_mnist_fromscratch.py`). Prints one `name: value` line per result (the value a Python literal).
"""
import argparse

import numpy as np
import numpy.random as npr
from sklearn.datasets import load_digits

import jax
import jax.numpy as jnp
from jax import grad, jit, random, vmap
from jax.scipy.special import logsumexp
from jax.tree_util import tree_map


def init_random_params(scale, layer_sizes, rng=npr.RandomState(0)):
    return [(scale * rng.randn(m, n), scale * rng.randn(n))
            for m, n, in zip(layer_sizes[:-1], layer_sizes[1:])]


def predict(params, inputs):
    activations = inputs
    for w, b in params[:-1]:
        outputs = jnp.dot(activations, w) + b
        activations = jax.nn.relu(outputs)

    final_w, final_b = params[-1]
    logits = jnp.dot(activations, final_w) + final_b
    return logits - logsumexp(logits, axis=1, keepdims=True)


def loss(params, batch):
    inputs, targets = batch
    preds = predict(params, inputs)
    return -jnp.mean(jnp.sum(preds * targets, axis=1))


def accuracy(params, batch):
    inputs, targets = batch
    target_class = jnp.argmax(targets, axis=1)
    predicted_class = jnp.argmax(predict(params, inputs), axis=1)
    return jnp.mean(predicted_class == target_class)


def example_loss(params, image, target):
    """The loss of one example: the batch loss of a batch of one."""
    return loss(params, (image[None], target[None]))


# one gradient pytree per example (parameters shared, examples mapped), and each one's global norm
per_example_grads = jit(vmap(grad(example_loss), in_axes=(None, 0, 0)))


def global_norms(grads):
    return jnp.sqrt(sum(jnp.sum(g.reshape(g.shape[0], -1) ** 2, axis=1) for g in jax.tree_util.tree_leaves(grads)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    args = parser.parse_args()

    layer_sizes = [64, 32, 10]
    param_scale = 0.1
    step_size = 0.1
    batch_size = 64

    digits = load_digits()
    images = digits.data / 16.0                             # float64, as numpy makes it
    labels = np.eye(10)[digits.target]                      # one-hot, float64
    train_images, train_labels = images[:1500], labels[:1500]
    test_images, test_labels = images[1500:], labels[1500:]
    num_batches = len(train_images) // batch_size

    params = init_random_params(param_scale, layer_sizes)
    first = (train_images[:batch_size], train_labels[:batch_size])
    print(f"initial loss: {float(loss(params, first))}")
    norms = global_norms(per_example_grads(params, train_images[:4], train_labels[:4]))
    print(f"per-example gradient norms: {np.asarray(norms).tolist()}")

    @jit
    def update(params, batch):
        grads = grad(loss)(params, batch)
        return [(w - step_size * dw, b - step_size * db)
                for (w, b), (dw, db) in zip(params, grads)]

    params = update(params, first)
    print(f"loss after one step: {float(loss(params, first))}")

    @jit
    def momentum_update(params, velocity, batch):
        grads = grad(loss)(params, batch)
        velocity = tree_map(lambda v, g: 0.9 * v + g, velocity, grads)
        return tree_map(lambda p, v: p - step_size * v, params, velocity), velocity

    velocity = tree_map(jnp.zeros_like, params)
    key = random.PRNGKey(0)
    for epoch in range(args.epochs):
        key, subkey = random.split(key)
        perm = np.asarray(random.permutation(subkey, len(train_images)))
        for i in range(num_batches):
            idx = perm[i * batch_size:(i + 1) * batch_size]
            params, velocity = momentum_update(params, velocity, (train_images[idx], train_labels[idx]))
    print(f"train accuracy: {float(accuracy(params, (train_images, train_labels)))}")
    print(f"test accuracy: {float(accuracy(params, (test_images, test_labels)))}")


if __name__ == "__main__":
    main()
