"""The API reference stays complete: every public name has a docstring, docs/api.md is generated from them
(tools/apiref.py) and current, and the examples in the docstrings of the main entry points run."""
from __future__ import annotations

import doctest
import importlib.util
import pathlib

import pytest

import fnx

ROOT = pathlib.Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("apiref", ROOT / "tools" / "apiref.py")
apiref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(apiref)

EXAMPLES = {"fnx.grad": fnx.grad, "fnx.vjp": fnx.vjp, "fnx.jvp": fnx.jvp, "fnx.vmap": fnx.vmap,
            "fnx.compile": fnx.compile, "fnx.Tensor.backward": fnx.Tensor.backward}


def test_every_public_name_has_a_docstring():
    assert apiref.undocumented() == [], "write a docstring (a line on what it is and why), then run " \
                                        "python tools/apiref.py"


def test_api_reference_is_current():
    assert (ROOT / "docs" / "api.md").read_text() == apiref.render(), "run python tools/apiref.py"


def test_api_reference_covers_the_main_namespaces():
    covered = {module for module, _ in apiref.MODULES}
    assert {"fnx", "fnx.Tensor", "fnx.nn", "fnx.nn.functional", "fnx.optim", "fnx.data", "fnx.linalg", "fnx.random",
            "fnx.distributed", "fnx.autograd"} <= covered
    for module in covered:
        assert apiref.public_names(module), module


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_docstring_examples_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    finder = doctest.DocTestFinder(recurse=False)
    tests = finder.find(EXAMPLES[name], name, globs={})
    assert tests and tests[0].examples, f"{name}'s docstring has no >>> example"
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0
