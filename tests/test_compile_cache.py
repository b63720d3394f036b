"""The compiled-kernel cache (fnx/lowering/cache.py) trusts nothing it reads: private folders only, entries
checked against their sidecar's sha256, nothing unpickled; writes are fsynced atomic renames, interrupted
compiles leave nothing behind, the size is capped (LRU), and `python -m fnx cache` shows or clears it. Also the
compiler choice (CC, an explicit backend="c" without a compiler) and where fnx's warnings point.

Every test uses its own FNX_CACHE_DIR (tmp_path). Tests that load a damaged library run in a subprocess, so
a crash (SIGBUS) fails the test instead of killing pytest.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
import pickle
import shutil
import stat
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import jinja2
import jinja2.bccache
import pytest

import fnx
from fnx import lowering
from fnx.lowering import cache, codegen, cpu
from fnx.lowering.plan import build_executable

ROOT = Path(fnx.__file__).resolve().parent.parent
HAVE_CC = any(shutil.which(c) for c in ("cc", "gcc", "clang"))
needs_cc = pytest.mark.skipif(not HAVE_CC, reason="needs a C compiler")
needs_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                                reason="giving a file to another user needs root")
OTHER_UID = 65534   # nobody


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A fresh cache folder for this test (FNX_CACHE_DIR), not yet created."""
    path = tmp_path / "kernels"
    monkeypatch.setenv("FNX_CACHE_DIR", str(path))
    monkeypatch.delenv("FNX_CACHE_MAX_BYTES", raising=False)
    return path


def run_python(script: str, cache_folder: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "FNX_CACHE_DIR": str(cache_folder), "PYTHONPATH": str(ROOT)}
    env.pop("FNX_BACKEND", None)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, env=env,
                          cwd=ROOT)


# ---------------------------------------------------------------- the folder
def test_a_new_cache_folder_is_private(folder):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.cache_dir() == folder
    assert stat.S_IMODE(folder.stat().st_mode) & 0o077 == 0


def _fallback_after_one_warning(folder: Path, match: str) -> Path:
    with pytest.warns(RuntimeWarning, match=match) as record:
        used = cache.cache_dir()
    assert len(record) == 1 and record[0].filename == __file__   # fnx's warnings point at the caller's line
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # warned once: the second lookup is silent
        assert cache.cache_dir() == used
    assert used != folder and used.is_dir()
    st = used.stat()
    assert st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) == 0o700
    return used


def test_a_folder_others_can_write_is_refused(folder):
    folder.mkdir()
    folder.chmod(0o777)
    used = _fallback_after_one_warning(folder, "writable by other users")
    cache.write_entry(cache.entry_path(cache.cache_dir(), "fnx_k", "0" * 64, ".txt"), b"x")
    assert not list(folder.iterdir()) and len(list(used.iterdir())) == 2   # entry and sidecar in the private one


@needs_root
def test_a_folder_of_another_user_is_refused(folder):
    folder.mkdir(mode=0o700)
    os.chown(folder, OTHER_UID, OTHER_UID)
    _fallback_after_one_warning(folder, f"belongs to another user \\(uid {OTHER_UID}\\)")


def test_a_read_only_folder_falls_back_with_one_warning(folder, monkeypatch):
    folder.mkdir(mode=0o700)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == folder else real_access(p, mode))
    _fallback_after_one_warning(folder, "is read-only")   # root ignores permission bits: hence the mock


def test_a_file_in_place_of_the_folder_falls_back(folder):
    folder.write_text("not a folder")
    _fallback_after_one_warning(folder, "cannot be used")


# ---------------------------------------------------------------- entries
def test_an_entry_is_fsynced_before_it_is_renamed_into_place_then_gets_its_sidecar(folder, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", str(src), str(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    path = cache.entry_path(cache.cache_dir(), "fnx_k", "1" * 64, ".so")
    tmp = cache.temp_path(path)
    Path(tmp).write_bytes(b"some kernel")
    cache.commit_entry(tmp, path)
    assert events[:2] == [("fsync", tmp), ("replace", tmp, str(path))]
    assert events[2][0] == "replace" and events[2][2] == str(path) + ".sha256"   # the sidecar comes last
    record = json.loads(Path(str(path) + ".sha256").read_text())
    assert record == {"sha256": hashlib.sha256(b"some kernel").hexdigest(), "size": 11}
    assert cache.read_entry(path) == b"some kernel"
    cache.write_entry(path, b"a record")               # small records: the same, less the fsync
    assert cache.read_entry(path) == b"a record"
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


@needs_cc
def test_compiled_libraries_are_fsynced_before_replace(folder, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"))),
                                                 real_fsync(fd))[-1])
    monkeypatch.setattr(os, "replace", lambda s, d: (events.append(("replace", str(s), str(d))),
                                                     real_replace(s, d))[-1])
    build_executable(fnx.make_jaxpr(lambda v: fnx.exp(v) * 5.0)(fnx.ones(3)), backend="c")
    libraries = [e for e in events if e[0] == "replace" and e[2].endswith(".so")]
    kernels = [e for e in libraries if Path(e[2]).name.startswith("fnx_fused_exp_mul")]
    assert len(kernels) == 1 and len(libraries) <= 2   # and fnx's thread pool, where this process had not loaded it
    for library in libraries:
        assert events.index(("fsync", library[1])) < events.index(library)
        assert Path(library[2] + ".sha256").is_file()


def test_a_changed_or_truncated_entry_is_not_used(folder):
    calls = []
    make = lambda: calls.append(1) or "int kernel(void) { return 1; }\n"
    key = "2" * 64
    assert cache.cached_text("fnx-render-k", key, make) == make() and len(calls) == 2
    path = cache.entry_path(cache.cache_dir(), "fnx-render-k", key, ".txt")
    path.write_text("int kernel(void) { return 2; }\n")       # same size, other bytes
    assert cache.cached_text("fnx-render-k", key, make).endswith("return 1; }\n") and len(calls) == 3
    path.write_bytes(path.read_bytes()[:10])                    # truncated
    assert cache.cached_text("fnx-render-k", key, make).endswith("return 1; }\n") and len(calls) == 4
    Path(str(path) + ".sha256").write_text("not json")
    assert cache.read_entry(path) is None


def _give_away(path: Path) -> None:
    os.chown(path, OTHER_UID, OTHER_UID)


@pytest.mark.parametrize("spoil", [lambda p: p.chmod(0o666), pytest.param(_give_away, marks=needs_root),
                                   lambda p: (p.rename(str(p) + ".real"), p.symlink_to(str(p) + ".real"))],
                         ids=["writable-by-others", "other-owner", "symlink"])
def test_an_entry_others_could_have_written_is_ignored(folder, spoil):
    path = cache.entry_path(cache.cache_dir(), "fnx_k", "3" * 64, ".so")
    cache.write_entry(path, b"library")
    assert cache.read_entry(path) == b"library"
    spoil(path)
    with pytest.warns(RuntimeWarning, match="ignoring .* it will be rebuilt"):
        assert cache.read_entry(path) is None


@needs_cc
def test_a_truncated_or_changed_library_is_rebuilt_not_loaded(tmp_path):
    script = """
        import fnx
        from fnx.lowering import cpu
        out = fnx.compile(lambda v: fnx.exp(v) * 3.0, backend="c")(fnx.zeros(5))
        print(cpu.compile_count, float(out.sum().item()))
    """
    assert run_python(script, tmp_path).stdout.split() == ["2", "15.0"]   # the kernel and fnx's thread pool
    (library,) = tmp_path.glob("fnx_*.so")
    good = library.read_bytes()
    record = json.loads(Path(str(library) + ".sha256").read_text())
    assert record == {"sha256": hashlib.sha256(good).hexdigest(), "size": len(good)}
    for damage in (good[:len(good) // 2], good[:-1] + bytes([good[-1] ^ 0xFF])):
        library.write_bytes(damage)
        run = run_python(script, tmp_path)
        assert run.returncode == 0, run.stderr          # a truncated library once meant SIGBUS on every run
        assert run.stdout.split() == ["1", "15.0"]      # rebuilt
        rebuilt = library.read_bytes()                  # (not byte-identical: it names its temporary source file)
        assert len(rebuilt) == len(good) and json.loads(Path(str(library) + ".sha256").read_text())["sha256"] == \
            hashlib.sha256(rebuilt).hexdigest()
    assert run_python(script, tmp_path).stdout.split() == ["0", "15.0"]   # and then used again


@needs_cc
def test_a_programs_kernels_compile_as_a_few_units_each_cached_under_its_own_name(tmp_path):
    """Missing kernels compile a few translation units at a time (the prelude once each), and the library of a
    unit is the cache entry of each of its kernels (hard links, counted once), so a later process loads each
    kernel by its own key and compiles nothing; a damaged unit is rebuilt for every kernel in it."""
    script = """
        import fnx
        from fnx.lowering import cpu
        fnx.set_num_threads(1)                  # two units
        def f(a, b, c, d):                      # four kernels: four shapes
            return fnx.exp(a) * 0.0, fnx.sin(b) * 0.0, fnx.tanh(c).sum(1) * 0.0, fnx.sqrt(d) + 1.0
        outs = fnx.compile(f, backend="c")(fnx.ones(3), fnx.ones(4), fnx.ones((5, 2)), fnx.zeros(6))
        print(cpu.compile_count, sum(float(o.sum().item()) for o in outs))
    """
    first = run_python(script, tmp_path).stdout.split()
    kernels = sorted(tmp_path.glob("fnx_*.so"))
    assert first == ["3", "6.0"] and len(kernels) == 4   # two units and the thread pool
    inodes = [p.stat().st_ino for p in kernels]
    assert len(set(inodes)) == 2 and all(p.stat().st_nlink == inodes.count(p.stat().st_ino) for p in kernels)
    for p in kernels:
        assert cache.read_entry(p) is not None   # each with its own sidecar
    _, size = cache.usage(tmp_path)
    distinct = {(p.stat().st_ino, p.stat().st_size) for p in tmp_path.iterdir() if cache._ENTRY.fullmatch(p.name)}
    assert size <= sum(n for _, n in distinct)   # each linked library counted once
    assert run_python(script, tmp_path).stdout.split() == ["0", "6.0"]
    kernels[0].write_bytes(kernels[0].read_bytes()[:-1] + b"x")   # damages each kernel of its unit: rebuilt
    assert run_python(script, tmp_path).stdout.split() == [str(min(inodes.count(inodes[0]), 2)), "6.0"]
    assert run_python(script, tmp_path).stdout.split() == ["0", "6.0"]


@pytest.mark.parametrize("links", [True, False], ids=["hard-links", "copies"])
def test_an_entry_under_several_names_is_each_ones_with_its_sidecar(folder, monkeypatch, links):
    used = cache.cache_dir()
    paths = [cache.entry_path(used, f"fnx_k{i}", f"{i}" * 64, ".so") for i in range(3)]
    if not links:   # a file system without hard links
        monkeypatch.setattr(os, "link", lambda *a: (_ for _ in ()).throw(OSError(1, "not permitted")))
    tmp = cache.temp_path(paths[0])
    Path(tmp).write_bytes(b"library")
    cache.commit_entry(tmp, paths[0], also=paths[1:])
    assert [cache.read_entry(p) for p in paths] == [b"library"] * 3
    assert all((p.stat().st_ino == paths[0].stat().st_ino) == links for p in paths[1:])
    assert all(stat.S_IMODE(p.stat().st_mode) & 0o077 == 0 for p in paths)
    assert sorted(p.name for p in used.iterdir()) == sorted(n for p in paths for n in (p.name, p.name + ".sha256"))


def test_jinja_bytecode_is_never_loaded(folder, monkeypatch):
    """Jinja2's bytecode cache unpickles its files: one planted there ran as the user. No longer used."""
    marker = folder.parent / "payload-ran"

    class Payload:
        def __reduce__(self):
            return open, (str(marker), "w")

    folder.mkdir(mode=0o700)
    templates = Path(codegen.__file__).parent / "templates"
    planter = jinja2.FileSystemBytecodeCache()
    for t in templates.glob("*.j2"):
        key = planter.get_cache_key(t.name, os.path.normpath(str(t)))
        (folder / f"template-{key}.jinja").write_bytes(jinja2.bccache.bc_magic + pickle.dumps(Payload()))

    def refuse(*args, **kwargs):
        raise AssertionError("something was unpickled")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(codegen._ENV, "cache", {})   # compile every template again in this process
    assert "fnx_exp" in codegen.prelude("c")
    x = fnx.ones(4, 3)
    from fnx.lowering.plan import plan_steps
    _, kernels = plan_steps(fnx.make_jaxpr(lambda v: (v * 2.0).sum(-1))(x), "c")
    assert kernels and not marker.exists()


# ---------------------------------------------------------------- interrupted compiles
class _Compiler:
    """A stand-in for the compiler subprocess that Ctrl-C interrupts while fnx waits for it."""

    started: list = []

    def __init__(self, cmd, **kwargs):
        self.cmd, self.killed, self.returncode = cmd, False, None
        _Compiler.started.append(self)

    def communicate(self):
        raise KeyboardInterrupt

    def poll(self):
        return self.returncode

    def kill(self):
        self.killed, self.returncode = True, -9

    def wait(self, timeout=None):
        return self.returncode


@needs_cc
def test_ctrl_c_during_a_compile_stops_the_compilers_and_leaves_no_files(folder, monkeypatch):
    cpu.toolchain()                                  # probe the real compiler first
    monkeypatch.setattr(_Compiler, "started", [])
    monkeypatch.setattr(subprocess, "Popen", _Compiler)
    sources = {"fnx_a": "int a;\n", "fnx_b": "int b;\n"}
    with pytest.raises(KeyboardInterrupt):
        cpu.compile_libraries(sources, "test", lambda simd: "")
    assert len(_Compiler.started) == 2 and all(p.killed for p in _Compiler.started)
    assert all(Path(p.cmd[p.cmd.index("-o") + 1]).parent == folder for p in _Compiler.started)   # temporaries there
    assert [p.name for p in folder.iterdir()] == []


# ---------------------------------------------------------------- size limit
def test_least_recently_used_entries_are_evicted_past_the_limit(folder, monkeypatch):
    monkeypatch.setenv("FNX_CACHE_MAX_BYTES", "2500")
    used = cache.cache_dir()
    paths = [cache.entry_path(used, f"fnx_k{i}", f"{i}" * 64, ".so") for i in range(4)]
    for i, p in enumerate(paths):
        cache.write_entry(p, bytes(1000))
        os.utime(p, (1000 + i, 1000 + i))          # written in order: 0 is the oldest
    (used / "notes.txt").write_bytes(bytes(5000))  # not fnx's: never counted or removed
    assert cache.read_entry(paths[0]) is not None  # a use renews entry 0
    cache.evict(used, keep=[paths[1]])
    left = sorted(p.name for p in used.iterdir())
    assert [p.exists() for p in paths] == [True, True, False, False]
    assert "notes.txt" in left and not any(n.startswith(paths[2].name) for n in left)
    assert cache.usage(used)[1] <= 2500


def test_after_a_scan_writes_evict_only_when_the_count_passes_the_limit_or_a_minute_has_gone(folder, monkeypatch):
    """A process scans the folder for eviction once, then counts what it writes: no scan while that stays within
    the limit, one as soon as it passes it, or after a minute (other processes write too)."""
    monkeypatch.setenv("FNX_CACHE_MAX_BYTES", "2500")
    used = cache.cache_dir()
    scans = []
    real = cache._our_files
    monkeypatch.setattr(cache, "_our_files", lambda f: scans.append(f) or real(f))
    paths = [cache.entry_path(used, f"fnx_k{i}", f"{i}" * 64, ".so") for i in range(4)]
    cache.write_entry(paths[0], bytes(1000))
    cache.evict_after_write(used, [paths[0]])              # the first write of this process scans
    cache.write_entry(paths[1], bytes(1000))
    cache.evict_after_write(used, [paths[1]])              # 1000 more: within 2500, no scan
    assert len(scans) == 1 and all(p.exists() for p in paths[:2])
    cache.write_entry(paths[2], bytes(1000))
    cache.evict_after_write(used, [paths[2]])              # past the limit: a scan evicts the oldest
    assert len(scans) == 2 and not paths[0].exists() and paths[2].exists()
    monkeypatch.setattr(cache, "_scanned", {str(used): (time.time() - 61, 0)})
    cache.write_entry(paths[3], bytes(10))
    cache.evict_after_write(used, [paths[3]])              # a minute on: scanned again
    assert len(scans) == 3


def test_the_size_limit_reads_units_and_rejects_nonsense(monkeypatch):
    monkeypatch.setenv("FNX_CACHE_MAX_BYTES", "500M")
    assert cache.max_bytes() == 500 << 20
    monkeypatch.setenv("FNX_CACHE_MAX_BYTES", "12345")
    assert cache.max_bytes() == 12345
    monkeypatch.setenv("FNX_CACHE_MAX_BYTES", "lots-of-room")
    with pytest.warns(RuntimeWarning, match="not a size"):
        assert cache.max_bytes() == cache.DEFAULT_MAX_BYTES


def test_python_m_fnx_cache_shows_and_clears(folder):
    used = cache.cache_dir()
    cache.write_entry(cache.entry_path(used, "fnx_k", "4" * 64, ".so"), bytes(2048))
    (used / "notes.txt").write_text("mine")
    show = subprocess.run([sys.executable, "-m", "fnx", "cache"], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True).stdout
    assert str(used) in show and "in 2 files" in show and "2.1 KiB" in show
    cleared = subprocess.run([sys.executable, "-m", "fnx", "cache", "--clear"], capture_output=True, text=True,
                             cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True).stdout
    assert "removed 2 files" in cleared and "0 bytes in 0 files" in cleared
    assert [p.name for p in used.iterdir()] == ["notes.txt"]


# ---------------------------------------------------------------- the compiler
@needs_cc
def test_cc_naming_a_missing_compiler_warns_and_names_the_one_used(monkeypatch, tmp_path):
    missing = str(tmp_path / "no-such-cc")
    monkeypatch.setenv("CC", missing)
    with pytest.warns(RuntimeWarning, match=f"CC='{missing}' is not an executable.*compiling with /") as record:
        used = cpu.compiler()
    assert len(record) == 1 and record[0].filename == __file__
    assert used == shutil.which(used) and used != missing


def test_no_compiler_an_explicit_c_backend_raises_the_default_interprets(monkeypatch):
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.delenv("FNX_BACKEND", raising=False)
    monkeypatch.setattr(lowering, "_warned", set())
    x = fnx.arange(4.0)
    with pytest.raises(cpu.NoCompilerError, match="backend 'c' was asked for .*no C compiler found"):
        fnx.compile(lambda v: v * 2.0 + 1.0, backend="c")(x)
    with pytest.warns(RuntimeWarning, match="no C compiler found.*running the IR interpreter") as record:
        f = fnx.compile(lambda v: v * 2.0 + 1.0)
        out = f(x)                                  # the warning is raised deep inside fnx, shown at this line
    assert len(record) == 1 and record[0].filename == __file__
    assert f.lower(x).backend == "interpret" and out.tolist() == [1.0, 3.0, 5.0, 7.0]
