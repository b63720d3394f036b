"""fnx's modules import only downward (DESIGN.md "Layering and shared state").

The test parses every module under fnx/ with `ast`, collects each import (at module level or inside a
function: an import moved into a function to dodge a cycle is still an edge) and checks that no edge runs
up the stack below. A module may import modules of its own layer (ops calling ops, transforms composing
transforms); an upward call is a hook the upper layer registers at import (the list is at the top of
fnx/core.py), or a method it attaches to Tensor.
"""
from __future__ import annotations

import ast
from pathlib import Path

FNX = Path(__file__).resolve().parent.parent / "fnx"

# Bottom to top. A module's layer is that of the longest entry naming it or a package above it;
# the exact-name entries of the top layer ("fnx" is the package's __init__) cover nothing below them.
LAYERS = [
    ("leaf", ["fnx._warn", "fnx._version", "fnx.version", "fnx._heap", "fnx._dlpack", "fnx._threefry", "fnx._graph",
              "fnx.errors", "fnx.abstract", "fnx.dtypes", "fnx.device", "fnx.array_pointers", "fnx.array_layout",
              "fnx.tree", "fnx.tree_util", "fnx.determinism", "fnx.backends", "fnx.threads"]),
    ("tensor", ["fnx.tensor", "fnx.legacy_types", "fnx.storage"]),  # the data type: core makes Tensors; methods that call ops are attached above
    # Primitive, bind, the trace stack; the jaxpr IR and its evaluator; FNX_DEBUG's op log (it wraps Primitive.impl)
    ("core", ["fnx.core", "fnx.ir", "fnx.debug"]),
    ("rule builders", ["fnx.ops._batching"]),  # the batching interpreter and batch rule builders primitives use
    ("ops", ["fnx.ops", "fnx.random", "fnx.rng", "fnx.linalg", "fnx.fft", "fnx.cuda", "fnx.accelerator", "fnx.numpy",
             "fnx.sparse"]),
    ("tensor methods", ["fnx._methods"]),
    ("autograd", ["fnx.autograd"]),
    # cond / while_loop / scan hold jaxprs: their jvp, vjp and batch rules transform the body (as JAX's
    # lax.control_flow sits above its interpreters), so they belong with the transforms they call
    ("transforms", ["fnx.transforms", "fnx.ops.control"]),
    ("lowering", ["fnx.lowering"]),
    ("compile", ["fnx.transforms.compile"]),  # the compile transform: stages with transforms, runs lowering's kernels
    ("distributed", ["fnx.distributed"]),  # collectives: ops and vmap rules; nn.parallel and data build on them
    ("libraries", ["fnx.nn", "fnx.optim", "fnx.func", "fnx.autograd_functional", "fnx.data", "fnx.serialization",
                   "fnx.hub", "fnx.quasirandom",   # torch.hub (reads checkpoints with fnx.load), torch.quasirandom
                   "fnx.export", "fnx.utils",
                   # fnx.special: torch.special's names, softmax among them; fnx.lax, fnx.scipy: JAX's
                   "fnx.distributions", "fnx.special", "fnx.signal", "fnx.lax", "fnx.scipy", "fnx.example_libraries",
                   # autocast and GradScaler's public surface (the per-op casting is fnx/ops/autocast.py)
                   "fnx.amp", "fnx.cpu", "fnx.cuda.amp", "fnx.testing", "fnx.profiler", "fnx.compiler",
                   "fnx.return_types",
                   "fnx.multiprocessing"]),
    ("top", ["fnx", "fnx.__main__", "fnx.jax_api", "fnx.demo", "fnx._env", "fnx._alias", "fnx.torch_alias", "fnx.torchscript",
             "fnx._torch_shim", "fnx._torch_shim.torch", "fnx.jax_alias", "fnx._jax", "fnx._jax_config",
             "fnx._jax_tree", "fnx._jax_shim", "fnx._jax_shim.jax"]),
]
_TOP_EXACT = set(LAYERS[-1][1])


def _modules() -> dict[str, Path]:
    """Dotted name -> file, for every module and package (a directory without __init__.py too)."""
    mods = {}
    for path in FNX.rglob("*.py"):
        parts = list(path.relative_to(FNX.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    for d in FNX.rglob("*"):
        if d.is_dir() and d.name != "__pycache__" and any(d.glob("*.py")):
            mods.setdefault(".".join(d.relative_to(FNX.parent).parts), d)
    return mods


def _imports(name: str, path: Path, mods: dict) -> list[tuple[str, int]]:
    """(imported fnx module, line) for every import statement in the module `name`."""
    if path.is_dir():
        return []
    is_pkg = path.name == "__init__.py"
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                src = ".".join(base + ([node.module] if node.module else []))
            else:
                src = node.module or ""
            targets = [f"{src}.{a.name}" if f"{src}.{a.name}" in mods else src for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        for t in targets:
            if t != "fnx" and not t.startswith("fnx."):
                continue
            while t not in mods and "." in t:
                t = t.rsplit(".", 1)[0]
            if t != name:
                out.append((t, node.lineno))
    return out


def layer_of(module: str) -> int | None:
    best, rank = -1, None
    for i, (_, names) in enumerate(LAYERS):
        for entry in names:
            exact = entry in _TOP_EXACT
            if module == entry or (not exact and module.startswith(entry + ".")):
                if len(entry) > best:
                    best, rank = len(entry), i
    return rank


def test_every_module_has_a_layer():
    missing = sorted(m for m in _modules() if layer_of(m) is None)
    assert not missing, f"modules with no layer in tests/test_layers.py LAYERS: {missing}"


def test_imports_only_go_down_the_stack():
    mods = _modules()
    bad = []
    for name, path in sorted(mods.items()):
        src = layer_of(name)
        for target, line in _imports(name, path, mods):
            dst = layer_of(target)
            if src is not None and dst is not None and dst > src:
                bad.append(f"{path.relative_to(FNX.parent)}:{line}: {name} ({LAYERS[src][0]}) imports "
                           f"{target} ({LAYERS[dst][0]})")
    assert not bad, "imports up the stack (make the upper layer register a hook instead):\n" + "\n".join(bad)


def test_the_check_sees_function_level_imports(tmp_path):
    """An import inside a function is an edge like any other."""
    p = tmp_path / "m.py"
    p.write_text("def f():\n    from ..autograd import tape\n    return tape\n")
    assert _imports("fnx.ops.m", p, {"fnx.autograd.tape": None}) == [("fnx.autograd.tape", 2)]
