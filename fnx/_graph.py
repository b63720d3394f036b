"""Topological order of a backward graph, shared by the eager tape engine and the vjp transform."""
from __future__ import annotations

from typing import Callable, Iterable


def toposort(roots: Iterable, inputs: Callable) -> list:
    """Nodes reachable from `roots`, each before every node it depends on (consumers first).

    `inputs(node)` yields the nodes that `node` consumes (None entries are skipped). Nodes compare by identity.
    """
    order, seen = [], set()
    for root in roots:
        if root is None or id(root) in seen:
            continue
        seen.add(id(root))
        stack = [(root, iter(inputs(root)))]
        while stack:
            node, it = stack[-1]
            for p in it:
                if p is not None and id(p) not in seen:
                    seen.add(id(p))
                    stack.append((p, iter(inputs(p))))
                    break
            else:
                stack.pop()
                order.append(node)
    order.reverse()
    return order
