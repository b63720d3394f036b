"""Training-step workloads through each framework's nn and optim: W5 an MLP step, W7 a transformer layer.

W5: MLP 784-512-512-10 with ReLU, a batch of 256, cross-entropy, backward and an SGD step, written with
`nn.Sequential`, `F.cross_entropy` and `optim.SGD`. W7: one `nn.TransformerEncoderLayer` (d_model 256,
4 heads, feed-forward 2048, batch_first) on 8 sequences of 128 tokens, forward and backward of the mean
squared error to a fixed random target, in training mode with dropout 0.1 (PyTorch's defaults). Both
frameworks start from the same weight matrices (vectors keep each framework's initialisation). Each
workload has an eager case and a compiled one: torch.compile of the module (backward and optimizer step
as usual), and fnx.compile of the whole step written functionally (`fnx.value_and_grad` over the module
as a pytree, then `fnx.optim.functional.sgd`, donating the parameters and optimizer state as a JAX
training step would). The first call, the compilation, happens while building
the case and is not timed; a case that cannot compile on this machine is reported as skipped. Times are
per training step (the unit's "op").
"""
from __future__ import annotations

import importlib
import zlib

import numpy as np

from .frameworks import array, load, sync_for
from .registry import Bench, Skip, workload

__all__ = ["MLP_SIZES", "MLP_BATCH", "MLP_STEPS", "D_MODEL", "NHEAD", "SEQ", "SEQ_BATCH", "LAYER_STEPS"]

MLP_SIZES, MLP_BATCH, MLP_STEPS = (784, 512, 512, 10), 256, 5
D_MODEL, NHEAD, SEQ, SEQ_BATCH, LAYER_STEPS = 256, 4, 128, 8, 3
_MLP = "-".join(map(str, MLP_SIZES))


def _nn(fw: str):
    """(nn, nn.functional, optim) of framework `fw`."""
    if fw not in ("fnx", "torch"):
        raise Skip(f"{fw} has no nn modules")
    load(fw)
    return tuple(importlib.import_module(f"{fw}.{sub}") for sub in ("nn", "nn.functional", "optim"))


def _shared_weights(fw: str, module, device: str):
    """Overwrite every weight matrix of `module` with host values drawn from its name (the same in each framework)."""
    state = {}
    for name, t in module.state_dict().items():
        if t.ndim >= 2:
            bound = 1.0 / np.sqrt(t.shape[1])
            host = np.random.default_rng(zlib.crc32(name.encode())).uniform(-bound, bound, tuple(t.shape))
            state[name] = array(fw, host.astype(np.float32), device)
    module.load_state_dict(state, strict=False)
    return module


def _host_batch(shape: tuple, classes: int | None = None, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if classes is not None:
        return rng.integers(0, classes, size=shape)
    return rng.standard_normal(shape).astype(np.float32)


def _first_call(what: str, call):
    """Run `call()` (the compiling call); a failure means this machine cannot compile the case: Skip."""
    try:
        return call()
    except Exception as e:  # compilers raise many types (C compiler missing, unsupported op): all mean "cannot run"
        raise Skip(f"{what} failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")


def _torch_compiled(module, first_call):
    """torch.compile(module), after one `first_call(compiled)` that triggers the compilation."""
    compiled = load("torch").compile(module)
    _first_call("torch.compile", lambda: first_call(compiled))
    return compiled


# ---------------------------------------------------------------- W5: MLP training step
def _mlp_step(fw: str, device: str, compiled: bool) -> Bench:
    nn, F, optim = _nn(fw)
    layers = []
    for n_in, n_out in zip(MLP_SIZES[:-1], MLP_SIZES[1:]):
        layers += [nn.Linear(n_in, n_out), nn.ReLU()]
    model = _shared_weights(fw, nn.Sequential(*layers[:-1]).to(device), device)
    opt = optim.SGD(model.parameters(), lr=1e-3)
    x = array(fw, _host_batch((MLP_BATCH, MLP_SIZES[0])), device)
    y = array(fw, _host_batch((MLP_BATCH,), classes=MLP_SIZES[-1]), device)

    def step(net):
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss

    if compiled and fw == "fnx":
        return _fnx_compiled_mlp_step(model, x, y, F, optim, device)
    net = _torch_compiled(model, step) if compiled else model

    def run():
        for _ in range(MLP_STEPS):
            loss = step(net)
        return loss

    return Bench(run, ops=MLP_STEPS, sync=sync_for(fw, device))


def _fnx_compiled_mlp_step(model, x, y, F, optim, device: str) -> Bench:
    """The same step as one fnx.compile'd pure function of (parameters, optimizer state, batch)."""
    fnx = load("fnx")
    opt = optim.functional.sgd(lr=1e-3)

    def step(params, state, x, y):
        loss, grads = fnx.value_and_grad(lambda m: F.cross_entropy(m(x), y))(params)
        params, state = opt.update(grads, state, params)
        return loss, params, state

    compiled = fnx.compile(step, donate_argnums=(0, 1))   # the new parameters and state overwrite the old ones
    params = fnx.tree.tree_map(lambda t: t.detach(), model)
    carry = list(_first_call("fnx.compile", lambda: compiled(params, opt.init(params), x, y))[1:])

    def run():
        for _ in range(MLP_STEPS):
            loss, carry[0], carry[1] = compiled(carry[0], carry[1], x, y)
        return loss

    return Bench(run, ops=MLP_STEPS, sync=sync_for("fnx", device))


@workload("W5", f"MLP {_MLP} b{MLP_BATCH} train step, eager", reference="torch", frameworks=("fnx", "torch"),
          unit="ms/op")
def w5_mlp_eager(fw: str, device: str) -> Bench:
    return _mlp_step(fw, device, compiled=False)


@workload("W5", f"MLP {_MLP} b{MLP_BATCH} train step, compiled", reference="torch",
          frameworks=("fnx", "torch"), unit="ms/op")
def w5_mlp_compiled(fw: str, device: str) -> Bench:
    return _mlp_step(fw, device, compiled=True)


# ---------------------------------------------------------------- W7: transformer encoder layer
def _layer_step(fw: str, device: str, compiled: bool) -> Bench:
    nn, F, _ = _nn(fw)
    layer = nn.TransformerEncoderLayer(D_MODEL, NHEAD, batch_first=True).to(device)
    layer = _shared_weights(fw, layer.train(), device)
    x = array(fw, _host_batch((SEQ_BATCH, SEQ, D_MODEL)), device)
    target = array(fw, _host_batch((SEQ_BATCH, SEQ, D_MODEL), seed=1), device)

    def step(net):
        layer.zero_grad()
        loss = F.mse_loss(net(x), target)
        loss.backward()
        return loss

    if compiled and fw == "fnx":
        return _fnx_compiled_layer_step(layer, x, target, F, device)
    net = _torch_compiled(layer, step) if compiled else layer

    def run():
        for _ in range(LAYER_STEPS):
            loss = step(net)
        return loss

    return Bench(run, ops=LAYER_STEPS, sync=sync_for(fw, device))


def _fnx_compiled_layer_step(layer, x, target, F, device: str) -> Bench:
    """The same forward and backward as one fnx.compile'd pure function of (layer, batch): value_and_grad
    over the module as a pytree; its dropout draws from the key that fnx.compile passes to every call."""
    fnx = load("fnx")
    step = fnx.compile(lambda m, x, t: fnx.value_and_grad(lambda m: F.mse_loss(m(x), t))(m))
    params = fnx.tree.tree_map(lambda t: t.detach(), layer)
    _first_call("fnx.compile", lambda: step(params, x, target))

    def run():
        for _ in range(LAYER_STEPS):
            loss, _ = step(params, x, target)
        return loss

    return Bench(run, ops=LAYER_STEPS, sync=sync_for("fnx", device))


_LAYER = f"encoder layer d{D_MODEL} h{NHEAD} {SEQ_BATCH}x{SEQ} fwd+bwd"


@workload("W7", f"{_LAYER}, eager", reference="torch", frameworks=("fnx", "torch"), unit="ms/op")
def w7_layer_eager(fw: str, device: str) -> Bench:
    return _layer_step(fw, device, compiled=False)


@workload("W7", f"{_LAYER}, compiled", reference="torch", frameworks=("fnx", "torch"), unit="ms/op")
def w7_layer_compiled(fw: str, device: str) -> Bench:
    return _layer_step(fw, device, compiled=True)
