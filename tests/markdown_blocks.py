"""The Python snippets of a Markdown page, each with the output that the page shows after it.

A snippet is a block fenced as ```python; a block fenced ```python no-run (or any other language) is shown but
never run. A ```text block right after a snippet is the output the snippet prints. Used by test_docs.py
for docs/*.md (and usable by test_readme.py for README.md).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_SNIPPET = re.compile(r"```python\n(.*?)```(?:[ \t]*\n\s*```text\n(.*?)```)?", re.S)


@dataclass(frozen=True)
class Snippet:
    code: str
    expected: str | None   # the ```text block right after the snippet, if any
    line: int              # the page's line of the opening fence (1-based), for messages


def python_snippets(markdown: str) -> list[Snippet]:
    """Every ```python snippet of `markdown`, in page order."""
    return [Snippet(m.group(1), m.group(2), markdown.count("\n", 0, m.start()) + 1)
            for m in _SNIPPET.finditer(markdown)]


def normalise(output: str) -> str:
    """Output as compared with a page: trailing spaces on a line and blank lines at either end do not count."""
    return "\n".join(line.rstrip() for line in output.strip("\n").splitlines())
