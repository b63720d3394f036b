"""Test configuration: a derandomized hypothesis profile for CI, and the `cuda` marker's skip."""
import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=25,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=25, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_collection_modifyitems(config, items):
    import fnx

    if fnx.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA (CuPy and an NVIDIA GPU)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
