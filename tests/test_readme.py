"""The README's Python snippets run as written (so the user guide stays true)."""
import pathlib

import pytest

from markdown_blocks import python_snippets

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = [s.code for s in python_snippets(README.read_text())]


def test_readme_has_snippets():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_snippet_runs(index, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(BLOCKS[index], f"README.md snippet {index}", "exec"), {"__name__": "__readme__"})
    assert capsys.readouterr().out.strip(), "each snippet prints what it computed"
