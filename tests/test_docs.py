"""docs/*.md stay true: each page's Python snippets run in order in one namespace, and a snippet's printed
output equals the ```text block that follows it on the page (after `normalise`)."""
from __future__ import annotations

import os
import pathlib
import re

import pytest

import fnx
from markdown_blocks import normalise, python_snippets

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"
PAGES = sorted(DOCS.glob("*.md"))


@pytest.fixture
def clean_state(tmp_path, monkeypatch):
    """Each page runs in an empty folder; what it changes globally (environment, determinism) is restored."""
    monkeypatch.chdir(tmp_path)
    environ = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(environ)
    fnx.use_deterministic_algorithms(False)


def test_index_links_every_page():
    linked = set(re.findall(r"\]\(([\w-]+\.md)\)", (DOCS / "index.md").read_text()))
    assert linked == {p.name for p in PAGES} - {"index.md"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_snippets_print_what_the_page_shows(page, clean_state, capsys):
    namespace = {"__name__": f"docs.{page.stem}"}
    for snippet in python_snippets(page.read_text()):
        where = f"{page.name}:{snippet.line}"
        exec(compile(snippet.code, where, "exec"), namespace)
        out = capsys.readouterr().out
        if snippet.expected is None:
            assert not out, f"{where} prints, but the page shows no ```text block after it:\n{out}"
        else:
            assert normalise(out) == normalise(snippet.expected), f"{where} printed:\n{out}"


def test_numerics_page_shows_the_bounds_the_tests_assert():
    from test_codegen import ULP_BOUNDS
    from test_compile import OP_BOUNDS
    from test_compile_numerics import COMPOSITE_BOUNDS

    text = (DOCS / "numerics.md").read_text()
    shown = {name: int(ulp) for ulp, names in re.findall(r"^\| (\d) \| ([a-z0-9_ ]+) \|$", text, re.M)
             for name in names.split()}
    assert shown == ULP_BOUNDS
    classes = dict(re.findall(r"^\| (math|reductions) \| [^|]+ \| (?:eager \+ )?(\d+) \|$", text, re.M))
    assert {name: int(bound) for name, bound in classes.items()} == OP_BOUNDS
    rows = re.findall(r"^\| (\w+) \| (?:ulp|rel) \| (\S+) \| (\S+) \|$", text, re.M)
    assert {name: tuple(map(float, bounds)) for name, *bounds in rows} == COMPOSITE_BOUNDS
