"""End-to-end training: models learn real tasks through fnx.nn, fnx.optim and fnx.data, and survive a
checkpoint.

- an MLP on scikit-learn's bundled digits (8x8 images, 10 classes) reaches >= 95% held-out accuracy, trained
  with the eager API (`loss.backward(); opt.step()`) and with the functional one (`fnx.value_and_grad` +
  `fnx.optim.functional.adam`), over the model as a pytree or a parameter dict with `nn.functional_call`;
- a 2-layer TransformerEncoder learns to sort 6 tokens;
- `fnx.save` / `fnx.load` of the trained model's and optimizer's state dicts reproduce its predictions and its
  next optimizer step.

BLAS runs on one thread here: these matrices are small, and a second OpenBLAS thread only adds contention when
other processes share the machine (the tests assert what is learned, never how fast).
"""
import numpy as np
import pytest

import fnx
import fnx.data
import fnx.nn as nn
import fnx.nn.functional as F
import fnx.optim

datasets = pytest.importorskip("sklearn.datasets")
threadpoolctl = pytest.importorskip("threadpoolctl")

EPOCHS, BATCH, LR = 10, 64, 3e-3
SORT_VOCAB, SORT_LEN, SORT_DIM, SORT_STEPS = 8, 6, 32, 300


@pytest.fixture(scope="module", autouse=True)
def _one_blas_thread():
    with threadpoolctl.threadpool_limits(limits=1, user_api="blas"):
        yield


# ---------------------------------------------------------------- digits MLP
@pytest.fixture(scope="module")
def digits():
    """(train, test) Subsets of a TensorDataset of the 1797 digits, pixels scaled to [0, 1], split 80/20."""
    data = datasets.load_digits()
    images = fnx.tensor((data.data / 16.0).astype(np.float32))
    labels = fnx.tensor(data.target.astype(np.int64))
    dataset = fnx.data.TensorDataset(images, labels)
    return fnx.data.random_split(dataset, [0.8, 0.2], generator=fnx.Generator().manual_seed(0))


def make_mlp() -> nn.Module:
    fnx.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


def train_loader(train) -> fnx.data.DataLoader:
    """Shuffled batches, a fresh order each epoch, the same sequence of orders in every test."""
    return fnx.data.DataLoader(train, batch_size=BATCH, shuffle=True, generator=fnx.Generator().manual_seed(1))


def whole(subset) -> tuple:
    """The subset's (images, labels) as one batch."""
    (images, labels), = fnx.data.DataLoader(subset, batch_size=len(subset))
    return images, labels


def accuracy(logits, labels) -> float:
    return (logits.argmax(dim=1) == labels).float().mean().item()


def evaluate(model: nn.Module, test) -> float:
    images, labels = whole(test)
    model.eval()
    with fnx.no_grad():
        return accuracy(model(images), labels)


@pytest.fixture
def trained_eager(digits):
    """An MLP and its Adam optimizer after EPOCHS epochs of the eager training loop (fresh for each test)."""
    train, _ = digits
    model = make_mlp()
    opt = fnx.optim.Adam(model.parameters(), lr=LR)
    loader = train_loader(train)
    model.train()
    for _ in range(EPOCHS):
        for images, labels in loader:
            opt.zero_grad()
            loss = F.cross_entropy(model(images), labels)
            loss.backward()
            opt.step()
    return model, opt


def test_mlp_digits_eager(digits, trained_eager):
    model, _ = trained_eager
    assert evaluate(model, digits[1]) >= 0.95


@pytest.mark.parametrize("form", ["module pytree", "functional_call"])
def test_mlp_digits_functional(digits, form):
    """The same training as pure functions: gradients from fnx.value_and_grad, updates from functional adam.

    The parameters are detached first (as with torch.func): leaves that require grad would make the eager
    tape record every update and chain all steps' graphs together.
    """
    train, test = digits
    model = make_mlp()
    if form == "module pytree":
        params = fnx.tree.tree_map(lambda t: t.detach(), model)

        def loss_fn(m, images, labels):
            return F.cross_entropy(m(images), labels)
    else:
        params = {name: p.detach() for name, p in model.named_parameters()}

        def loss_fn(p, images, labels):
            return F.cross_entropy(nn.functional_call(model, p, (images,)), labels)

    opt = fnx.optim.functional.adam(lr=LR)
    state = opt.init(params)
    loss_and_grads = fnx.value_and_grad(loss_fn)
    loader = train_loader(train)
    for _ in range(EPOCHS):
        for images, labels in loader:
            loss, grads = loss_and_grads(params, images, labels)
            params, state = opt.update(grads, state, params)
    assert int(state["step"]) == EPOCHS * len(loader)
    assert all(leaf.grad_fn is None for leaf in fnx.tree.tree_leaves(params))
    if form == "functional_call":
        model.load_state_dict(params)
    else:
        model = params
    assert evaluate(model, test) >= 0.95


# ---------------------------------------------------------------- transformer sorting tokens
class Sorter(nn.Module):
    """Token and learned position embeddings, a 2-layer TransformerEncoder, a per-position classifier."""

    def __init__(self):
        super().__init__()
        self.tokens = nn.Embedding(SORT_VOCAB, SORT_DIM)
        self.positions = nn.Parameter(0.1 * fnx.randn(SORT_LEN, SORT_DIM))
        layer = nn.TransformerEncoderLayer(SORT_DIM, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2)
        self.head = nn.Linear(SORT_DIM, SORT_VOCAB)

    def forward(self, x):
        return self.head(self.encoder(self.tokens(x) + self.positions))


def sort_batch(rng: np.random.Generator, n: int):
    x = rng.integers(0, SORT_VOCAB, size=(n, SORT_LEN))
    return fnx.tensor(x), fnx.tensor(np.sort(x, axis=1))


def test_transformer_learns_to_sort():
    """Adam with a one-cycle schedule and gradient clipping; fresh random sequences every step.

    Chance is 1/8 per token; after training the held-out loss is ~0.006 and every sequence comes out sorted.
    """
    fnx.manual_seed(0)
    rng = np.random.default_rng(0)
    model = Sorter()
    opt = fnx.optim.Adam(model.parameters(), lr=3e-3)
    schedule = fnx.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=SORT_STEPS)
    for _ in range(SORT_STEPS):
        x, y = sort_batch(rng, BATCH)
        loss = F.cross_entropy(model(x).reshape(-1, SORT_VOCAB), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        opt.step()
        schedule.step()
    x, y = sort_batch(rng, 512)
    model.eval()
    with fnx.no_grad():
        logits = model(x)
    assert F.cross_entropy(logits.reshape(-1, SORT_VOCAB), y.reshape(-1)).item() < 0.05
    sorted_rows = (logits.argmax(dim=-1) == y).all(dim=-1).float().mean().item()
    assert sorted_rows >= 0.95


# ---------------------------------------------------------------- checkpoint round trip
def test_checkpoint_round_trip(tmp_path, digits, trained_eager):
    """A fresh model and optimizer loaded from the checkpoint predict, and then step, exactly as the originals."""
    model, opt = trained_eager
    path = tmp_path / "digits.fnx"
    fnx.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epochs": EPOCHS}, path)
    checkpoint = fnx.load(path)
    assert checkpoint["epochs"] == EPOCHS

    restored = make_mlp()
    restored.load_state_dict(checkpoint["model"])
    restored_opt = fnx.optim.Adam(restored.parameters(), lr=LR)
    restored_opt.load_state_dict(checkpoint["optimizer"])
    images, labels = whole(digits[1])
    for m in (model, restored):
        m.eval()
    with fnx.no_grad():
        np.testing.assert_array_equal(restored(images).numpy(), model(images).numpy())

    for m, o in ((model, opt), (restored, restored_opt)):
        o.zero_grad()
        F.cross_entropy(m(images), labels).backward()
        o.step()
    for (name, p), q in zip(model.named_parameters(), restored.parameters()):
        np.testing.assert_array_equal(q.detach().numpy(), p.detach().numpy(), err_msg=name)
