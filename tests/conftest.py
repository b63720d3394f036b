"""Test configuration: a derandomized hypothesis profile for CI, fixed thread counts, one kernel cache per run,
and the `cuda` marker's skip."""
import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=25,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=25, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
# Thread counts the tests can check: no dynamic teams (tests/test_threads_dynamic.py turns them on itself), here
# and in the processes tests start.
os.environ["FNX_DYNAMIC_THREADS"] = "0"


def pytest_collection_modifyitems(config, items):
    import fnx

    if fnx.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA (CuPy and an NVIDIA GPU)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def kernel_cache(tmp_path_factory):
    """One FNX_CACHE_DIR for the run, shared by xdist workers (writes are atomic renames): compiled kernels
    never land in the user's cache."""
    root = tmp_path_factory.getbasetemp()
    shared = (root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root) / "fnx-kernel-cache"
    shared.mkdir(mode=0o700, exist_ok=True)
    old = os.environ.get("FNX_CACHE_DIR")
    os.environ["FNX_CACHE_DIR"] = str(shared)
    yield shared
    if old is None:
        del os.environ["FNX_CACHE_DIR"]
    else:
        os.environ["FNX_CACHE_DIR"] = old


@pytest.fixture(autouse=True)
def builds_ahead_finish():
    """C loops that a test started building ahead of need (a layer's, an optimizer's, a forward loop's backward)
    finish within it, so that no later test sees their compiles (cpu.compile_count) or their cache entries."""
    yield
    from fnx.lowering import template_library

    template_library._finish_builds()
