"""Write docs/api.md, the API reference, from the docstrings of every public name.

    python tools/apiref.py          rewrite docs/api.md
    python tools/apiref.py --check  exit 1 if docs/api.md is out of date or a public name has no docstring

A module's public names are its `__all__` (or, for `fnx` itself, every attribute not starting with `_`
that is not a module); `fnx.Tensor`'s are its attributes not starting with `_`. Each row shows a name and
the first paragraph of its docstring. tests/test_apiref.py checks that the page is current and that no
public name lacks a docstring, so a new public name needs one, then `python tools/apiref.py`.
"""
from __future__ import annotations

import importlib
import inspect
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "api.md"

# (module, what the section covers), in page order
MODULES = [
    ("fnx", "tensors, dtypes, devices, ops, transforms, compile, save/load"),
    ("fnx.Tensor", "attributes and methods (the ops are the same functions as in `fnx`)"),
    ("fnx.autograd", "eager autograd: backward, grad modes, custom Functions, debugging aids"),
    ("fnx.linalg", "linear algebra (torch.linalg)"),
    ("fnx.fft", "discrete Fourier transforms (torch.fft)"),
    ("fnx.sparse", "sparse COO tensors and their products, sums and softmax (torch.sparse)"),
    ("fnx.numpy", "the NumPy API with JAX's semantics (jax.numpy, imported as jnp)"),
    ("fnx.numpy.linalg", "jnp.linalg: numpy's linear-algebra signatures"),
    ("fnx.numpy.fft", "jnp.fft: numpy's Fourier-transform signatures"),
    ("fnx.special", "special functions (torch.special)"),
    ("fnx.signal.windows", "window functions with SciPy's names (torch.signal.windows)"),
    ("fnx.random", "pure, key-based random numbers (jax.random)"),
    ("fnx.rng", "torch.random: seeding and saving the default generators, fork_rng"),
    ("fnx.hub", "torch.hub: hubconf.py entry points from GitHub or a directory, checkpoints from URLs"),
    ("fnx.quasirandom", "torch.quasirandom: SobolEngine, Sobol' sequences with PyTorch's numbers"),
    ("fnx.tree", "pytrees"),
    ("fnx.tree_util", "pytrees under JAX's names (jax.tree_util)"),
    ("fnx.lax", "control flow, dynamic slices, dot_general, convolutions, windows (jax.lax)"),
    ("fnx.scipy.special", "special functions (jax.scipy.special)"),
    ("fnx.scipy.stats.norm", "the normal distribution's functions (jax.scipy.stats.norm)"),
    ("fnx.scipy.stats.multivariate_normal", "the multivariate normal density (jax.scipy.stats.multivariate_normal)"),
    ("fnx.scipy.stats.bernoulli", "the Bernoulli mass function (jax.scipy.stats.bernoulli)"),
    ("fnx.scipy.stats.beta", "the beta density (jax.scipy.stats.beta)"),
    ("fnx.scipy.linalg", "Cholesky and triangular solves (jax.scipy.linalg)"),
    ("fnx.export", "a function as a saved program: export, load, symbolic dimensions"),
    ("fnx.func", "the transforms under torch.func's names and argument orders"),
    ("fnx.autograd_functional", "Jacobians, Hessians and vector products (torch.autograd.functional)"),
    ("fnx.transforms.forward_ad", "eager forward-mode autodiff with dual tensors (torch.autograd.forward_ad)"),
    ("fnx.cuda", "CUDA availability, memory counters, device queries, streams and events (torch.cuda)"),
    ("fnx.nn", "modules, layers, losses, containers (torch.nn)"),
    ("fnx.nn.functional", "the functional forms (torch.nn.functional, imported as F)"),
    ("fnx.nn.init", "parameter initialisers"),
    ("fnx.nn.initializers", "key-based initializers (jax.nn.initializers)"),
    ("fnx.nn.utils", "gradient clipping, parameter vectors, weight and spectral normalization"),
    ("fnx.nn.utils.prune", "pruning by masks (torch.nn.utils.prune)"),
    ("fnx.nn.parallel", "data-parallel training"),
    ("fnx.nn.attention", "SDPA backend selection: sdpa_kernel, SDPBackend (torch.nn.attention)"),
    ("fnx.nn.attention.bias", "causal attention biases for scaled_dot_product_attention (torch.nn.attention.bias)"),
    ("fnx.nn.attention.flex_attention", "attention with score_mod and block masks (torch.nn.attention.flex_attention)"),
    ("fnx.optim", "optimizers (torch.optim)"),
    ("fnx.optim.lr_scheduler", "learning-rate schedules"),
    ("fnx.optim.swa_utils", "weight averaging: SWA and EMA models, update_bn, SWALR"),
    ("fnx.multiprocessing", "Python's multiprocessing plus spawn / start_processes (torch.multiprocessing)"),
    ("fnx.profiler", "op-level profiling: profile, record_function, schedules, Chrome traces (torch.profiler)"),
    ("fnx.testing", "test helpers (torch.testing): assert_close with PyTorch's tolerances, make_tensor"),
    ("fnx.compiler", "torch.compiler: is_compiling, is_exporting, disable (a graph break), reset, list_backends"),
    ("fnx.return_types", "torch.return_types: the named-tuple types of max, sort, topk, linalg.slogdet, ..."),
    ("fnx.optim.functional", "optimizers as pure init/update functions"),
    ("fnx.amp", "mixed precision: autocast regions and GradScaler (torch.amp)"),
    ("fnx.data", "datasets, samplers, DataLoader (torch.utils.data)"),
    ("fnx.distributions", "probability distributions and KL divergences (torch.distributions)"),
    ("fnx.distributions.constraints", "the constraints on distributions' parameters and supports"),
    ("fnx.distributed", "processes, collectives (torch.distributed)"),
    ("fnx.distributed.functional", "collectives as differentiable primitives"),
    ("fnx.example_libraries.optimizers", "JAX's example optimizers: (init, update, get_params) triples"),
    ("fnx.example_libraries.stax", "JAX's example layer library: (init_fun, apply_fun) pairs"),
]


def _target(module: str):
    if module == "fnx.Tensor":
        import fnx

        return fnx.Tensor
    return importlib.import_module(module)


def public_names(module: str) -> list[str]:
    """The public names of `module` ("fnx.Tensor": the Tensor class's attributes), sorted."""
    obj = _target(module)
    names = getattr(obj, "__all__", None) if inspect.ismodule(obj) else None
    if names is None:
        names = [n for n in dir(obj) if not n.startswith("_") and not inspect.ismodule(getattr(obj, n))]
    return sorted(set(names), key=lambda n: (n.lower(), n))


def _member(module: str, name: str):
    obj = _target(module)
    if module == "fnx.Tensor":
        return inspect.getattr_static(obj, name)
    return getattr(obj, name)


def _is_value(member) -> bool:
    """A constant (a dtype, a default generator): documented by its type, not a docstring of its own."""
    return not (inspect.isclass(member) or callable(member) or isinstance(member, property))


def docstring(member) -> str | None:
    if isinstance(member, (staticmethod, classmethod)):
        member = member.__func__
    if inspect.isclass(member):
        return member.__dict__.get("__doc__")   # not inherited: each class says what it is
    return getattr(member, "__doc__", None)


def summary(module: str, name: str) -> str:
    """The first paragraph of the docstring of `module.name`, on one line."""
    member = _member(module, name)
    if _is_value(member):
        kind = f"a `{type(member).__module__.split('.')[0]}.{type(member).__name__}`"
        import fnx

        return f"{kind}: `{member!r}`" if isinstance(member, fnx.dtype) else kind   # a dtype alias names its dtype
    doc = inspect.cleandoc(docstring(member) or "")
    first = " ".join(doc.split("\n\n")[0].split())
    return first.replace("|", "\\|")


def undocumented() -> list[str]:
    """Public names (callables, classes, properties) without a docstring, as "module.name"."""
    missing = []
    for module, _ in MODULES:
        for name in public_names(module):
            member = _member(module, name)
            if not _is_value(member) and not (docstring(member) or "").strip():
                missing.append(f"{module}.{name}")
    return missing


def render() -> str:
    lines = ["# API reference", "",
             "Every public name of fnx with the first paragraph of its docstring; `help(fnx.name)` shows the "
             "whole docstring.", "Generated by `python tools/apiref.py` (tests/test_apiref.py checks that this "
             "page is current and that every public name has a docstring).", ""]
    lines += [f"- [`{m}`](#{m.replace('.', '').lower()}): {what}" for m, what in MODULES]
    for module, what in MODULES:
        lines += ["", f"## {module}", "", f"{what[0].upper()}{what[1:]}.", "", "| name | |", "|---|---|"]
        lines += [f"| `{name}` | {summary(module, name)} |" for name in public_names(module)]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        missing = undocumented()
        for name in missing:
            print(f"no docstring: {name}")
        stale = not PAGE.exists() or PAGE.read_text() != text
        if stale:
            print(f"{PAGE.relative_to(ROOT)} is out of date: run python tools/apiref.py")
        return 1 if missing or stale else 0
    PAGE.write_text(text)
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main(sys.argv[1:]))
