"""W9's training steps: one model of benchmarks/models.py, its batch and optimizer, and each way of stepping it.

`make_task(torch, model, size)` builds the model (from `torch` or `fnx`), a fixed random batch, the
optimizer its public training script uses, and `step(net)`: one step of that script's loop (forward,
loss, backward, optimizer step) where `net` is the model or `compile(model)`. `functional_step(fnx,
task)` is the same step as one fnx.compile'd pure function, written as a JAX user would: `value_and_grad`
of the loss over the parameters passed to `nn.functional_call`, then `fnx.optim.functional` updates per
optimizer parameter group, donating parameters and optimizer state. Nothing here times anything.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .models import CNNConfig, GPTConfig, LlamaConfig, LSTMConfig, define
from .programs import PROGRAMS, load

__all__ = ["MODELS", "SIZES", "Task", "make_task", "functional_step", "describe_model", "MakemoreConfig"]


@dataclass(frozen=True)
class MakemoreConfig:
    """A model of makemore.py (tests/programs) with its command line's defaults: ModelConfig's sizes, AdamW's
    settings; its names are `words` random ones of 3-12 letters (no names.txt here)."""

    type: str
    n_layer: int = 4
    n_embd: int = 64
    n_embd2: int = 64
    n_head: int = 4
    learning_rate: float = 5e-4
    weight_decay: float = 0.01
    words: int = 2000

# The configurations at each size: (config, batch, sequence length). "small" is CPU-training size (nanoGPT's
# CPU example: 4 layers x 128 wide on 64-token blocks); "large" is 4 layers x 256 wide on 16 x 256 tokens;
# "tiny" is for the smoke test (tests/test_benchmarks_w9.py), not timed.
SIZES = {
    "small": {
        "gpt": (GPTConfig(), 8, 64),
        "gpt-tanh": (GPTConfig(gelu="tanh"), 8, 64),
        "gpt-newgelu": (GPTConfig(gelu="new"), 8, 64),
        "llama": (LlamaConfig(), 8, 64),
        "lstm": (LSTMConfig(), 8, 64),
        "cnn": (CNNConfig(), 64, None),
        "makemore-rnn": (MakemoreConfig("rnn"), 32, None),
        "makemore-gru": (MakemoreConfig("gru"), 32, None),
        "makemore-mlp": (MakemoreConfig("mlp"), 32, None),
        "makemore-bow": (MakemoreConfig("bow"), 32, None),
    },
    "large": {
        "gpt": (GPTConfig(block_size=256, n_head=8, n_embd=256), 16, 256),
        "gpt-tanh": (GPTConfig(block_size=256, n_head=8, n_embd=256, gelu="tanh"), 16, 256),
        "gpt-newgelu": (GPTConfig(block_size=256, n_head=8, n_embd=256, gelu="new"), 16, 256),
        "llama": (LlamaConfig(dim=256, n_heads=8, n_kv_heads=4, max_seq_len=256), 16, 256),
        "lstm": (LSTMConfig(ninp=256, nhid=256), 16, 256),
        "cnn": (CNNConfig(), 256, None),
    },
    "tiny": {
        "gpt": (GPTConfig(n_layer=1, n_head=2, n_embd=16), 2, 8),
        "gpt-tanh": (GPTConfig(n_layer=1, n_head=2, n_embd=16, gelu="tanh"), 2, 8),
        "gpt-newgelu": (GPTConfig(n_layer=1, n_head=2, n_embd=16, gelu="new"), 2, 8),
        "llama": (LlamaConfig(vocab_size=64, dim=16, n_layers=1, n_heads=4, n_kv_heads=2, multiple_of=8), 2, 8),
        "lstm": (LSTMConfig(ntoken=64, ninp=16, nhid=16), 2, 8),
        "cnn": (CNNConfig(), 2, None),
        "makemore-rnn": (MakemoreConfig("rnn", n_embd=8, n_embd2=8, words=20), 2, None),
    },
}
MODELS = tuple(SIZES["small"])


def describe_model(model: str, size: str) -> str:
    """A short label of the model and its size, for the table's case column."""
    if model in PROGRAMS:
        return PROGRAMS[model] if size == "small" else f"{model} ({size})"
    cfg, batch, seq = SIZES[size][model]
    if model.startswith("gpt"):
        act = {"exact": "nn.GELU()", "tanh": "GELU tanh", "new": "NewGELU x**3"}[cfg.gelu]
        return f"GPT {cfg.n_layer}L d{cfg.n_embd} {act}, {batch}x{seq} tokens"
    if model == "llama":
        return f"Llama {cfg.n_layers}L d{cfg.dim} GQA {cfg.n_heads}/{cfg.n_kv_heads}, {batch}x{seq} tokens"
    if model.startswith("makemore"):
        return f"makemore {cfg.type.upper()} (its Dataset and DataLoader), batch {batch}"
    if model == "lstm":
        return f"LSTM LM 2L h{cfg.nhid} v{cfg.ntoken}, {batch}x{seq} tokens"
    return f"CNN mnist Net, batch {batch} x 1x28x28"


@dataclass
class Task:
    """A model, its batch and optimizer, and `step(net)`: one training step through `net` (the model or its
    compiled form), returning the loss. `loss_of(output, *targets)` maps the model's output to the loss."""

    model: Any
    optimizer: Any
    inputs: tuple          # the model's positional inputs
    targets: tuple         # the rest of the batch (what the loss compares against)
    step: Callable[[Any], Any]
    loss_of: Callable
    state: dict            # carried between steps (the LSTM's hidden state)
    config: Any = None


def _tokens(torch, rng, vocab: int, batch: int, seq: int):
    data = rng.integers(0, vocab, size=(batch, seq + 1))
    x = torch.tensor(data[:, :-1], dtype=torch.long)
    y = torch.tensor(data[:, 1:], dtype=torch.long)
    return x, y


def make_task(torch, model: str, size: str = "small", seed: int = 0) -> Task:
    """Build `model` at `size` from the framework module `torch`, with a fixed batch drawn from `seed` (a W12
    program seeds itself)."""
    if model in PROGRAMS:
        net, opt, step = load(torch, model).training(size)
        return Task(net, opt, (), (), step, None, {})
    ns = define(torch)
    F = torch.nn.functional
    cfg, batch, seq = SIZES[size][model]
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    if model.startswith("gpt"):
        net = ns.GPT(replace(cfg, block_size=seq))
        opt = net.configure_optimizers(weight_decay=0.1, learning_rate=1e-3, betas=(0.9, 0.99))
        x, y = _tokens(torch, rng, cfg.vocab_size, batch, seq)

        def loss_of(out, y):
            return out[1]

        def step(m):   # nanoGPT's train.py loop, without gradient accumulation, scaler and clipping
            logits, loss = m(x, y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss

        return Task(net, opt, (x, y), (y,), step, loss_of, {})
    if model == "llama":
        net = ns.Llama(replace(cfg, max_seq_len=seq))
        opt = net.configure_optimizers(weight_decay=0.1, learning_rate=1e-3, betas=(0.9, 0.95))
        x, y = _tokens(torch, rng, cfg.vocab_size, batch, seq)

        def loss_of(logits, y):
            return F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))

        def step(m):
            loss = loss_of(m(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss

        return Task(net, opt, (x,), (y,), step, loss_of, {})
    if model.startswith("makemore"):
        return _makemore_task(torch, cfg, batch, rng)
    if model == "lstm":
        return _lstm_task(torch, ns, cfg, batch, seq, rng)
    if model == "cnn":
        net = ns.Net()
        opt = torch.optim.SGD(net.parameters(), lr=cfg.lr, momentum=cfg.momentum)
        data = torch.tensor(rng.standard_normal((batch, 1, 28, 28)).astype(np.float32))
        target = torch.tensor(rng.integers(0, 10, size=batch), dtype=torch.long)

        def loss_of(output, target):
            return F.nll_loss(output, target)

        def step(m):   # examples/mnist train()
            opt.zero_grad()
            output = m(data)
            loss = loss_of(output, target)
            loss.backward()
            opt.step()
            return loss

        return Task(net, opt, (data,), (target,), step, loss_of, {})
    raise ValueError(f"unknown W9 model {model!r}; known: {', '.join(MODELS)}; W12's: {', '.join(PROGRAMS)}")


def _lstm_task(torch, ns, cfg: LSTMConfig, batch: int, seq: int, rng) -> Task:
    """word_language_model's train(): sequence-first batches of `seq` (bptt) steps, the hidden state carried
    (detached) from batch to batch, NLLLoss, clip_grad_norm_ and the hand-written SGD update."""
    net = ns.LSTMLM(cfg)
    criterion = torch.nn.NLLLoss()
    data = rng.integers(0, cfg.ntoken, size=(seq + 1, batch))
    x = torch.tensor(data[:-1], dtype=torch.long)
    y = torch.tensor(data[1:].reshape(-1), dtype=torch.long)
    state = {"hidden": net.init_hidden(batch)}

    def loss_of(out, y):
        return criterion(out[0], y)

    def step(m):
        net.zero_grad()   # the example calls model.zero_grad(); fnx.compile(model) has none (models.PROBES)
        hidden = ns.repackage_hidden(state["hidden"])
        output, state["hidden"] = m(x, hidden)
        loss = criterion(output, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), cfg.clip)
        for p in net.parameters():
            p.data.add_(p.grad, alpha=-cfg.lr)
        return loss

    return Task(net, None, (x,), (y,), step, loss_of, state, cfg)


# ---------------------------------------------------------------- makemore: a public program's own code
_MAKEMORE = Path(__file__).resolve().parents[1] / "tests" / "programs" / "makemore.py"


def _makemore_module(torch):
    """tests/programs/makemore.py loaded as a module of its own, its `import torch` giving `torch` (fnx through
    the torch alias: only in a process that never imports real torch, such as a W9 worker)."""
    if torch.__name__ == "fnx":
        torch.install_torch_alias()
    spec = importlib.util.spec_from_file_location("w9_makemore", _MAKEMORE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _makemore_task(torch, cfg: MakemoreConfig, batch: int, rng) -> Task:
    """makemore's training loop: a batch from its InfiniteDataLoader over its CharDataset each step (the data
    code runs per sample, as in the program), the model's (logits, loss), backward and AdamW."""
    mm = _makemore_module(torch)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = ["".join(rng.choice(letters, size=rng.integers(3, 13))) for _ in range(cfg.words)]
    chars = sorted(set("".join(words)))
    data = mm.CharDataset(words, chars, max(len(w) for w in words))
    config = mm.ModelConfig(vocab_size=data.get_vocab_size(), block_size=data.get_output_length(),
                            n_layer=cfg.n_layer, n_embd=cfg.n_embd, n_embd2=cfg.n_embd2, n_head=cfg.n_head)
    net = {"rnn": lambda: mm.RNN(config, cell_type="rnn"), "gru": lambda: mm.RNN(config, cell_type="gru"),
           "mlp": lambda: mm.MLP(config), "bow": lambda: mm.BoW(config)}[cfg.type]()
    opt = torch.optim.AdamW(net.parameters(), lr=cfg.learning_rate, weight_decay=cfg.weight_decay,
                            betas=(0.9, 0.99), eps=1e-8)
    loader = mm.InfiniteDataLoader(data, batch_size=batch, pin_memory=False, num_workers=0)
    x, y = data[0]

    def loss_of(out, y):
        return out[1]

    def step(m):   # makemore's main loop, without its evaluation and sampling
        X, Y = loader.next()
        logits, loss = m(X, Y)
        net.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    return Task(net, opt, (x[None], y[None]), (y[None],), step, loss_of, {}, cfg)


# ---------------------------------------------------------------- the functional step (fnx only)
def _functional_optimizer(fnx, optimizer, group: dict):
    """The fnx.optim.functional form of `optimizer`'s rule with `group`'s hyperparameters."""
    name = type(optimizer).__name__
    if name == "AdamW":
        return fnx.optim.functional.adamw(lr=group["lr"], betas=group["betas"], eps=group["eps"],
                                          weight_decay=group["weight_decay"])
    if name == "SGD":
        return fnx.optim.functional.sgd(lr=group["lr"], momentum=group["momentum"],
                                        dampening=group["dampening"], nesterov=group["nesterov"],
                                        weight_decay=group["weight_decay"])
    raise NotImplementedError(f"no functional form of {name} in W9")


def functional_step(fnx, task: Task) -> Callable[[], Any]:
    """`run()`: one training step of `task` as one compiled pure function; the first call compiles."""
    model = task.model
    if task.optimizer is None:   # the LSTM: clip_grad_norm_ and plain SGD, written out over the gradients
        return _functional_lstm_step(fnx, task)
    names = {id(p): n for n, p in model.named_parameters()}
    groups = [{names[id(p)]: p.detach() for p in g["params"]} for g in task.optimizer.param_groups]
    opts = [_functional_optimizer(fnx, task.optimizer, g) for g in task.optimizer.param_groups]

    def loss_fn(groups, inputs, targets):
        return task.loss_of(fnx.nn.functional_call(model, groups, inputs), *targets)

    def step(groups, states, inputs, targets):
        loss, grads = fnx.value_and_grad(loss_fn)(groups, inputs, targets)
        updated = [opt.update(g, s, p) for opt, g, s, p in zip(opts, grads, states, groups)]
        return loss, [u[0] for u in updated], [u[1] for u in updated]

    compiled = fnx.compile(step, donate_argnums=(0, 1))
    carry = [groups, [opt.init(g) for opt, g in zip(opts, groups)]]

    def run():
        loss, carry[0], carry[1] = compiled(carry[0], carry[1], task.inputs, task.targets)
        return loss

    return run


def _functional_lstm_step(fnx, task: Task) -> Callable[[], Any]:
    model, cfg = task.model, task.config

    def loss_fn(params, hidden, inputs, targets):
        output, hidden = fnx.nn.functional_call(model, params, (*inputs, hidden))
        return task.loss_of((output, hidden), *targets), hidden

    def step(params, hidden, inputs, targets):
        (loss, hidden), grads = fnx.value_and_grad(loss_fn, has_aux=True)(params, hidden, inputs, targets)
        total = fnx.sqrt(sum((g * g).sum() for g in grads.values()))
        scale = fnx.clamp(cfg.clip / (total + 1e-6), max=1.0)
        params = {n: p - cfg.lr * scale * grads[n] for n, p in params.items()}
        return loss, params, hidden

    compiled = fnx.compile(step, donate_argnums=(0,))
    carry = [{n: p.detach() for n, p in model.named_parameters()}, task.state["hidden"]]

    def run():
        loss, carry[0], carry[1] = compiled(carry[0], carry[1], task.inputs, task.targets)
        return loss

    return run
