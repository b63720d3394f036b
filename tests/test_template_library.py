"""fnx/lowering/template_library.py: a C library of eager loops built once, on first use or ahead of it when a
compiled program holds a primitive whose impl calls it (`build_soon`)."""
import importlib
import shutil
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import fnx
from fnx.lowering import codegen, cpu, strided_kernels, template_library
from fnx.lowering.plan import build_executable
from fnx.lowering.template_library import TemplateLibrary, build_soon


def _slow_library(monkeypatch, primitive: str):
    """A library that names `primitive` and whose build takes 0.2 s, counting its builds."""
    monkeypatch.setattr(template_library, "_by_primitive", {})
    lib = TemplateLibrary("fnx-test", "c_outer.c.j2", [], "a test library", "nothing", primitives=(primitive,))
    builds, built = [], object()

    def build(parts, ahead=False):
        builds.append(threading.current_thread().name)
        time.sleep(0.2)
        return dict.fromkeys(parts, built)

    monkeypatch.setattr(lib, "_build", build)
    return lib, builds, built


def test_build_soon_builds_on_a_thread_of_its_own_once(monkeypatch):
    lib, builds, built = _slow_library(monkeypatch, "test_prim")
    build_soon([("other_prim", "float32")])
    assert builds == [] and not lib._libs
    build_soon([("test_prim", "float32"), ("test_prim", "float64")])
    build_soon([("test_prim", "float32")])
    assert lib.get() is built                  # waits for the build under way
    assert builds == ["fnx-build-fnx-test"]    # once, on its own thread
    build_soon([("test_prim", "float32")])
    assert lib.get() is built and len(builds) == 1


def test_lowering_a_program_starts_the_libraries_of_its_primitives(monkeypatch):
    started = []
    monkeypatch.setattr(TemplateLibrary, "start_building", lambda self, dtypes=None: started.append(self.name))
    a, b = fnx.ones(32, 32), fnx.ones(32, 32)
    build_executable(fnx.make_jaxpr(lambda x: fnx.exp(x) * 2.0)(a), backend="c")
    assert started == []
    build_executable(fnx.make_jaxpr(lambda x, y: fnx.exp(x @ y))(a, b), backend="c")
    assert started == ["fnx-gemm"]


def test_a_library_in_parts_builds_each_alone_on_use_or_all_ahead(tmp_path, monkeypatch):
    """Each part holds its own functions and the helpers they share (so parts build in translation units of their
    own); `function` builds one part, `start_building` every part not built yet."""
    monkeypatch.setenv("FNX_CACHE_DIR", str(tmp_path))
    names = [f"fnx_sum_{kind}_{sfx}" for kind in ("columns", "pairwise") for sfx in ("f32", "f64")]

    def library():
        return TemplateLibrary("fnx-test-parts", "c_sum_columns.c.j2", names, "a test library", "nothing",
                               parts=lambda f: f[4:])

    lib = library()
    assert lib.function("fnx_sum_columns_f32") is not None
    assert [p.name.split("-")[3] for p in tmp_path.glob("fnx-test-parts-*.so")] == ["sum_columns_f32"]
    assert not hasattr(lib._part("sum_columns_f32"), "fnx_sum_columns_f64")
    lib = library()
    lib.start_building({"float32"})   # build_soon: the parts for the dtypes a program uses
    template_library._finish_builds()
    assert sorted(lib._libs) == ["sum_columns_f32", "sum_pairwise_f32"]
    monkeypatch.setenv("FNX_CACHE_DIR", str(tmp_path / "fresh"))
    lib = library()
    threads = fnx.get_num_threads()
    fnx.set_num_threads(1)   # fewer units than parts, were they put together
    try:
        lib.start_building()
        template_library._finish_builds()
    finally:
        fnx.set_num_threads(threads)
    assert all(lib.function(name) is not None for name in names) and len(lib._libs) == 4
    assert len(list((tmp_path / "fresh").glob("fnx-test-parts-*.so"))) == 4


def test_a_function_starts_the_parts_called_after_it_and_waits_only_for_its_own(monkeypatch):
    """A forward loop's first use starts its backward's part on a thread (`after`); the caller builds its own part
    meanwhile and does not wait for the other, which builds once, and a later call of it waits for that build."""
    names = ["fnx_fwd_f32", "fnx_bwd_f32", "fnx_other_f32"]
    lib = TemplateLibrary("fnx-test-after", "c_outer.c.j2", names, "a test library", "nothing",
                          parts=lambda f: f[4:7], after=lambda f: ("fnx_bwd_f32",) if f == "fnx_fwd_f32" else ())
    builds, started, release = [], threading.Event(), threading.Event()

    class Built:
        fnx_fwd_f32 = fnx_bwd_f32 = fnx_other_f32 = object()

    def build(parts, ahead=False):
        builds.append((threading.current_thread().name, tuple(parts)))
        if parts == ["bwd"]:
            started.set()
            assert release.wait(5)
        return dict.fromkeys(parts, Built)

    monkeypatch.setattr(lib, "_build", build)
    assert lib.function("fnx_fwd_f32") is Built.fnx_fwd_f32   # while bwd's build waits
    assert lib.function("fnx_other_f32") is Built.fnx_other_f32
    assert started.wait(5)
    assert sorted(builds) == [("MainThread", ("fwd",)), ("MainThread", ("oth",)), ("fnx-build-fnx-test-after", ("bwd",))]
    release.set()
    assert lib.function("fnx_bwd_f32") is Built.fnx_bwd_f32
    assert lib.function("fnx_fwd_f32") is Built.fnx_fwd_f32 and len(builds) == 3


@pytest.mark.skipif(not any(shutil.which(c) for c in ("cc", "gcc", "clang")), reason="needs a C compiler")
def test_every_part_of_every_library_passes_the_compilers_checks(tmp_path):
    """Every template library's every part, after the prelude, compiles with fnx's flags, which make what GCC 14
    and clang 16 refuse (an implicit declaration: the GEMM's memcpy without string.h) an error with any compiler."""
    for module in ("attention", "copy", "depthwise", "eager", "gemm", "nn", "optim", "scatter", "strided", "window"):
        importlib.import_module(f"fnx.lowering.{module}_kernels")
    strided_kernels._library()   # made on first use
    flags = [f for f in cpu._BASE_FLAGS + cpu._VARIANTS[0][0] if f != "-shared" and not f.startswith("-Wl")]
    head = codegen.prelude("c", simd=True)
    sources = {(lib.name, part): head + lib.source(part) for lib in template_library.libraries
               if not lib.name.startswith("fnx-test") for part in lib.every_part()}
    assert len({name for name, _ in sources}) >= 13 and len(sources) >= 100

    def check(item):
        (name, part), source = item
        path = tmp_path / f"{name}-{part}.c"
        path.write_text(source)
        run = subprocess.run([cpu.toolchain().cc, *flags, "-fsyntax-only", str(path)], capture_output=True, text=True)
        return name, part, run.returncode, run.stderr[-2000:]

    with ThreadPoolExecutor(4) as pool:
        failed = [r for r in pool.map(check, sources.items()) if r[2] != 0]
    assert not failed, failed[0]


@pytest.mark.skipif(not any(shutil.which(c) for c in ("cc", "gcc", "clang")), reason="needs a C compiler")
def test_builds_ahead_of_need_run_their_compilers_niced(tmp_path, monkeypatch):
    """A part built on a thread before anyone waits for it yields the cores to the builds that callers wait for."""
    monkeypatch.setenv("FNX_CACHE_DIR", str(tmp_path))
    commands, real = [], subprocess.Popen
    monkeypatch.setattr(cpu.subprocess, "Popen", lambda cmd, **kw: commands.append(cmd) or real(cmd, **kw))
    names = [f"fnx_sum_columns_{sfx}" for sfx in ("f32", "f64")]
    lib = TemplateLibrary("fnx-test-nice", "c_sum_columns.c.j2", names, "a test library", "nothing",
                          parts=lambda f: f[-3:])
    lib.start_functions(["fnx_sum_columns_f64"])
    template_library._finish_builds()
    assert lib.function("fnx_sum_columns_f32") is not None and lib.function("fnx_sum_columns_f64") is not None
    niced = [c[:3] == [cpu._NICE, "-n", "10"] for c in commands if any("fnx-test-nice" in str(a) for a in c)]
    assert niced == [True, False] or cpu._NICE is None


def test_a_parts_source_is_rendered_once_and_kept_in_the_disk_cache(tmp_path, monkeypatch):
    """A process whose libraries are all cached compiles no template: each part's rendered text is kept under the
    templates, the context and the part's functions; other functions or another context render anew."""
    monkeypatch.setenv("FNX_CACHE_DIR", str(tmp_path))

    def library(*kinds, **context):
        return TemplateLibrary("fnx-test-render", "c_sum_columns.c.j2", [f"fnx_sum_{k}_f32" for k in kinds],
                               "a test library", "nothing", context=context, parts=lambda f: "f32")

    text = library("columns").source("f32")
    compiled, real = [], template_library._template
    monkeypatch.setattr(template_library, "_template", lambda name: compiled.append(name) or real(name))
    assert library("columns").source("f32") == text and compiled == []
    both = library("columns", "pairwise").source("f32")
    assert "fnx_sum_pairwise_f32" in both and "fnx_sum_pairwise_f32" not in text and len(compiled) == 1
    assert library("columns", unused=1).source("f32") == text and len(compiled) == 2


def test_every_part_renders_from_its_declared_functions_alone():
    """The cache keys a part's text by the functions the library declares for it, so a template may ask `wanted`
    only about those: rendered either way, every part of every library is the same text."""
    for module in ("attention", "copy", "depthwise", "eager", "gemm", "nn", "optim", "scatter", "strided", "window"):
        importlib.import_module(f"fnx.lowering.{module}_kernels")
    strided_kernels._library()
    checked = 0
    for lib in template_library.libraries:
        if lib.name.startswith("fnx-test"):
            continue
        template = template_library._template(lib.template)
        for part in lib.every_part():
            declared = {f for f in lib._names() if lib.parts(f) == part}
            by_parts = template.render(**lib.context, wanted=lambda f, part=part, lib=lib: lib.parts(f) == part)
            assert template.render(**lib.context, wanted=declared.__contains__) == by_parts, (lib.name, part)
            checked += 1
    assert checked >= 100
