"""`make demo`: train a small CNN on scikit-learn's digits, then time its training step eager vs `fnx.compile`.

Part 1 is the PyTorch way: a DataLoader, an `nn.Module`, AdamW and a one-cycle learning-rate schedule, with
`loss.backward()` and a tqdm progress bar. Part 2 writes the same step the JAX way, as a pure function
(`fnx.value_and_grad` over the model as a pytree, then `fnx.optim.functional.adamw`), compiles it with
`fnx.compile` and compares the time per step with the eager loop. Both run on CUDA when a GPU is available,
otherwise on the CPU. The digits (1797 8x8 images) ship with scikit-learn: nothing is downloaded.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import fnx
import fnx.nn as nn
import fnx.nn.functional as F
from fnx.data import DataLoader, TensorDataset, random_split

BATCH = 64


class DigitsCNN(nn.Module):
    """Two 3x3 convolutions with ReLU and 2x2 max pooling, then a linear classifier (6k parameters)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, kernel_size=3, padding=1)
        self.fc = nn.Linear(32 * 2 * 2, 10)

    def forward(self, x: fnx.Tensor) -> fnx.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def digits(device) -> tuple:
    """(train, test) subsets of the digits, images (1, 8, 8) in [0, 1], split 80/20 with a fixed seed."""
    from sklearn.datasets import load_digits

    data = load_digits()
    images = fnx.tensor((data.images / 16.0).astype(np.float32)[:, None], device=device)
    labels = fnx.tensor(data.target.astype(np.int64), device=device)
    return random_split(TensorDataset(images, labels), [0.8, 0.2], generator=fnx.Generator().manual_seed(0))


def accuracy(model: nn.Module, subset) -> float:
    (images, labels), = DataLoader(subset, batch_size=len(subset))
    model.eval()
    with fnx.no_grad():
        return (model(images).argmax(dim=1) == labels).float().mean().item()


def train_eager(model: nn.Module, train, epochs: int) -> None:
    """The PyTorch-style loop, with a progress bar showing the running loss."""
    from tqdm import tqdm

    loader = DataLoader(train, batch_size=BATCH, shuffle=True, generator=fnx.Generator().manual_seed(1))
    opt = fnx.optim.AdamW(model.parameters(), lr=3e-3)
    schedule = fnx.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=epochs * len(loader))
    model.train()
    with tqdm(total=epochs * len(loader), desc="training", unit="step") as bar:
        for epoch in range(epochs):
            for images, labels in loader:
                loss = F.cross_entropy(model(images), labels)
                opt.zero_grad()
                loss.backward()
                opt.step()
                schedule.step()
                bar.update()
            bar.set_postfix(epoch=epoch + 1, loss=f"{loss.item():.3f}")


def _sync(device) -> None:
    if device.type == "cuda":
        fnx.cuda.synchronize()


def time_steps(step, steps: int, device) -> float:
    """Seconds per call of `step()` (after two warm-up calls), the best of three rounds of `steps` calls."""
    step()
    step()
    _sync(device)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        _sync(device)
        best = min(best, (time.perf_counter() - start) / steps)
    return best


def compare_steps(train, device, steps: int) -> None:
    """Time one training step on a fixed batch: eager (tape + AdamW.step) vs a compiled functional step."""
    images, labels = next(iter(DataLoader(train, batch_size=BATCH)))
    fnx.manual_seed(0)
    model = DigitsCNN().to(device)
    opt = fnx.optim.AdamW(model.parameters(), lr=1e-3)

    def eager_step():
        loss = F.cross_entropy(model(images), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    def loss_fn(m, x, y):
        return F.cross_entropy(m(x), y)

    functional_opt = fnx.optim.functional.adamw(lr=1e-3)

    def train_step(params, opt_state, x, y):
        loss, grads = fnx.value_and_grad(loss_fn)(params, x, y)
        params, opt_state = functional_opt.update(grads, opt_state, params)
        return params, opt_state, loss

    compiled_step = fnx.compile(train_step)
    # the model as a pytree of detached leaves: the functional step returns new parameters, records no tape
    state = [fnx.tree.tree_map(lambda t: t.detach(), model), None]
    state[1] = functional_opt.init(state[0])

    def run_compiled():
        state[0], state[1], loss = compiled_step(state[0], state[1], images, labels)
        return loss

    start = time.perf_counter()
    run_compiled()
    _sync(device)
    elapsed = time.perf_counter() - start
    backend = compiled_step.lower(*state, images, labels).backend
    print(f"fnx.compile traced and built the training step in {elapsed:.2f} s "
          f"({len(compiled_step.kernels())} fused kernels, backend {backend!r})")
    eager = time_steps(eager_step, steps, device)
    compiled = time_steps(run_compiled, steps, device)
    print(f"training step, batch {BATCH}: eager {1e3 * eager:.2f} ms, compiled {1e3 * compiled:.2f} ms "
          f"-> speed-up {eager / compiled:.2f}x")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--steps", type=int, default=50, help="training steps per timing round")
    args = parser.parse_args(argv)
    device = fnx.device("cuda" if fnx.cuda.is_available() else "cpu")
    print(f"fnx {fnx.__version__} demo on {device}: a CNN on scikit-learn's 8x8 digits")
    fnx.manual_seed(0)
    train, test = digits(device)
    model = DigitsCNN().to(device)
    start = time.perf_counter()
    train_eager(model, train, args.epochs)
    print(f"{args.epochs} epochs in {time.perf_counter() - start:.1f} s; "
          f"test accuracy {accuracy(model, test):.3f} on {len(test)} held-out digits")
    compare_steps(train, device, args.steps)


if __name__ == "__main__":
    main()
