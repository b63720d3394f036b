"""Backends as `Target` objects (fnx/lowering/targets/): the registry, a new target made from an existing one,
the import rules of fnx/lowering (no cycles; only a missing optional dependency falls back to the interpreter)."""
from __future__ import annotations

import ast
import dataclasses
import functools
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import fnx
import fnx.nn.functional as F
from fnx.lowering import backends, check_backend, lower
from fnx.lowering import cuda as cuda_runtime
from fnx.lowering.codegen import prelude
from fnx.lowering.cpu import ARRAY_DATA_OFFSET
from fnx.lowering.interpret import Interpreted
from fnx.lowering.plan import generated_source, plan_steps
from fnx.lowering.targets import C, CUDA, OPENCL, TARGETS, Target, get_target

LOWERING = Path(fnx.__file__).parent / "lowering"


def test_registry_names_the_backends():
    assert TARGETS == {"c": C, "cuda": CUDA, "opencl": OPENCL} and backends() == ("interpret", "c", "cuda", "opencl")
    assert get_target("cuda") is CUDA and get_target(C) is C
    with pytest.raises(ValueError, match="unknown target 'metal'; expected one of c, cuda, opencl"):
        get_target("metal")
    for t in TARGETS.values():
        assert all((LOWERING / "templates" / name).is_file() for name in [t.prelude, *t.kernels.values()])


def test_a_new_target_is_one_object(monkeypatch):
    """A target registered under a new name (here C's templates and build under another name) compiles and runs;
    its kernels differ from C's in their names only (the hash takes the target's name)."""
    twin = dataclasses.replace(C, name="c_twin")
    monkeypatch.setitem(TARGETS, "c_twin", twin)
    assert check_backend("c_twin") == "c_twin"
    f = lambda x: F.softmax(x, -1) * 2.0 + x.sum()
    x = fnx.randn(5, 7)
    closed = fnx.make_jaxpr(f)(x)
    mine, theirs = plan_steps(closed, twin)[1], plan_steps(closed, "c")[1]
    assert [k.target for k in mine] == ["c_twin"] * len(theirs) and len(mine) >= 2
    for a, b in zip(mine, theirs):
        assert a.name != b.name and a.source.replace(a.name, b.name) == b.source
    got = fnx.compile(f, backend="c_twin")(x)
    np.testing.assert_allclose(got.numpy(), f(x).numpy(), rtol=1e-5, atol=1e-6)


def test_math_names_rename_calls_of_the_expression_table():
    """An OpenCL-like target calls the overloaded `sqrt` where the table says `sqrtf`; C keeps the table's names."""
    renamed = dataclasses.replace(C, name="c_overloads", math_names={"sqrtf": "sqrt", "fnx_expf": "fnx_exp"})
    closed = fnx.make_jaxpr(lambda x: fnx.sqrt(x) + fnx.exp(x))(fnx.ones(8))
    (plain,), (other,) = plan_steps(closed, C)[1], plan_steps(closed, renamed)[1]
    assert "sqrtf(v0)" in plain.source and "fnx_expf(v0)" in plain.source
    assert "sqrt(v0)" in other.source and "sqrtf(" not in other.source and "fnx_exp(v0)" in other.source


def test_generated_source_needs_no_compiler_or_gpu():
    closed = fnx.make_jaxpr(lambda x: (x * 2.0).sum(0))(fnx.randn(64, 48))
    cuda = generated_source(closed, "cuda")
    assert "FNX_KERNEL fnx_reduce_mul_sum_f32_" in cuda and '#define FNX_KERNEL extern "C" __global__ void' in cuda
    source = generated_source(closed, C)   # the C prelude reads numpy's data pointer where this Python keeps it
    assert f"#define FNX_DATA(array) (*(char **)((char *)(array) + {ARRAY_DATA_OFFSET}))" in source


def test_cuda_target_builds_one_module_and_launches_through_it(monkeypatch):
    """The CUDA target's wiring, with stand-ins for CuPy's module loading and launches (no GPU here)."""
    loaded = []
    monkeypatch.setattr(cuda_runtime, "load_module", lambda source, names: loaded.append((source, names)) or "module")
    monkeypatch.setattr(cuda_runtime, "launcher", lambda module, gk, flag: (module, gk.name, flag))
    monkeypatch.setattr(cuda_runtime, "_cupy", lambda: SimpleNamespace(zeros=np.zeros))
    closed = fnx.make_jaxpr(lambda i: F.one_hot(i, 5) * 2)(fnx.tensor(np.arange(12) % 5))
    kernels = plan_steps(closed, CUDA)[1]
    program = CUDA.build(kernels, functools.partial(prelude, CUDA))
    assert program.source == generated_source(closed, "cuda")
    assert loaded == [(program.source, [k.name for k in kernels])]
    assert any(k.kernel.checks for k in kernels) and program.flag.shape == (1,) and program.flag.dtype == np.int32
    assert program.launcher(kernels[0]) == ("module", kernels[0].name, program.flag)


@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("f", [lambda x: x * 2.0, lambda x: x.exp().sum(-1)], ids=["flat", "rows"])
def test_cuda_launchers_write_into_the_buffers_a_donating_driver_lends(monkeypatch, f, aligned):
    """A donating driver passes `outs=` (None where it lends no buffer): the launcher must use those buffers."""
    class FakeCupy:
        cuda = SimpleNamespace(Device=lambda: SimpleNamespace(attributes={"MultiProcessorCount": 132}))

        @staticmethod
        def empty(shape, dtype):
            return SimpleNamespace(shape=shape, dtype=dtype, data=SimpleNamespace(ptr=1 << 20 if aligned else 4))

        zeros = empty

    monkeypatch.setattr(cuda_runtime, "_cupy", lambda: FakeCupy)
    (gk,) = plan_steps(fnx.make_jaxpr(f)(fnx.ones(4, 8)), CUDA)[1]
    calls = []
    run = cuda_runtime.launcher(SimpleNamespace(get_function=lambda name: lambda *a: calls.append(a)), gk)
    x, lent = FakeCupy.empty((4, 8), np.float32), FakeCupy.empty(gk.kernel.outputs[0].aval.shape, np.float32)
    assert run(x, outs=(lent,)) == [lent] and calls[-1][2][1] is lent
    fresh = run(x, outs=(None,))[0]
    assert fresh is not lent and calls[-1][2][1] is fresh and run(x)[0] is not lent


def test_target_without_build_falls_back_to_the_interpreter(monkeypatch):
    """`Target.build` not implemented (an export-only target, say) is code generation that cannot run here."""
    bare = Target(name="export", extension="c", prelude=C.prelude, kernels=C.kernels, gpu=False)
    monkeypatch.setitem(TARGETS, "export", bare)
    closed = fnx.make_jaxpr(fnx.exp)(fnx.ones(2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert isinstance(lower(closed, backend="export"), Interpreted)
    assert any("cannot build kernels" in str(w.message) for w in caught)


def test_a_missing_template_engine_falls_back_but_a_broken_import_raises(monkeypatch):
    import jinja2

    closed = fnx.make_jaxpr(fnx.exp)(fnx.ones(2))
    for name in ("fnx.lowering.plan", "fnx.lowering.codegen"):
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "jinja2", None)   # import jinja2 -> ModuleNotFoundError(name="jinja2")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert isinstance(lower(closed, backend="c"), Interpreted)
    assert any("code generator is unavailable" in str(w.message) for w in caught)
    monkeypatch.setitem(sys.modules, "jinja2", jinja2)
    monkeypatch.setitem(sys.modules, "fnx.lowering.codegen", None)   # a module of fnx itself: a bug, not a fallback
    with pytest.raises(ImportError, match="fnx.lowering.codegen"):
        lower(closed, backend="c")


def _imports(module: str, path: Path) -> set[str]:
    """The modules that `module` (file `path`) imports relatively when it is imported: module-level statements only,
    so neither imports inside functions nor those under `if TYPE_CHECKING:`."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            found |= {f"{base}.{node.module}"} if node.module else {f"{base}.{a.name}" for a in node.names}
    return found


def test_lowering_modules_import_without_cycles():
    """plan asks a target to build and launch; the targets import the runtimes they use, never plan or codegen."""
    root = LOWERING.parent.parent
    modules = {".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
               for p in LOWERING.rglob("*.py")}
    graph = {m: _imports(m, p) & modules.keys() for m, p in modules.items()}
    assert "fnx.lowering.cuda" not in graph["fnx.lowering.plan"]
    assert not graph["fnx.lowering.cuda"] & {"fnx.lowering.plan", "fnx.lowering.codegen"}
    for m in modules:
        if m.startswith("fnx.lowering.targets"):
            assert not graph[m] & {"fnx.lowering.plan", "fnx.lowering.codegen"}, m
    state: dict[str, str] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = "open"
        for n in sorted(graph[m]):
            assert state.get(n) != "open", f"import cycle: {' -> '.join(path + [n])}"
            if n not in state:
                visit(n, path + [n])
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
