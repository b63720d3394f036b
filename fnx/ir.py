"""The IR: typed SSA in JAX's jaxpr form, with a printer, an evaluator and a verifier.

A `Jaxpr` has const variables (captured tensors), input variables,
equations `outs = prim[params](ins)` and output atoms. `eval_jaxpr` runs
it by binding each primitive, so evaluating under a transform transforms
it; it is the reference semantics for the compiler.
"""
from __future__ import annotations

from typing import Any

from .core import FnxRuntimeError, Primitive, ShapedArray

__all__ = ["Var", "Literal", "Eqn", "Jaxpr", "ClosedJaxpr", "eval_jaxpr", "verify_jaxpr"]


class Var:
    """An SSA variable with an abstract value; named when printed."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self) -> str:
        return f"Var({self.aval.str_short()})"


class Literal:
    """A scalar constant inlined into an equation."""

    __slots__ = ("val", "aval")

    def __init__(self, val, aval: ShapedArray):
        self.val, self.aval = val, aval

    def __repr__(self) -> str:
        v = self.val.item()
        return f"{v}:{self.aval.str_short()}"


class Eqn:
    __slots__ = ("prim", "inputs", "params", "outvars")

    def __init__(self, prim: Primitive, inputs: list, params: dict, outvars: list):
        self.prim, self.inputs, self.params, self.outvars = prim, inputs, params, outvars


class Jaxpr:
    """A typed SSA program: constvars, invars, equations `outs = prim[params](ins)` and outvars; printable in JAX's
    form."""
    __slots__ = ("constvars", "invars", "eqns", "outvars")

    def __init__(self, constvars: list, invars: list, eqns: list, outvars: list):
        self.constvars, self.invars, self.eqns, self.outvars = constvars, invars, eqns, outvars

    def __str__(self) -> str:
        return _Printer().jaxpr(self, indent=0)

    __repr__ = __str__


class ClosedJaxpr:
    """A jaxpr together with the values of its constvars; what `make_jaxpr` returns."""

    __slots__ = ("jaxpr", "consts")

    def __init__(self, jaxpr: Jaxpr, consts: list):
        self.jaxpr, self.consts = jaxpr, consts

    @property
    def in_avals(self) -> list:
        return [v.aval for v in self.jaxpr.invars]

    @property
    def out_avals(self) -> list:
        return [v.aval for v in self.jaxpr.outvars]

    @property
    def eqns(self) -> list:
        return self.jaxpr.eqns

    def __call__(self, *args):
        return eval_jaxpr(self.jaxpr, self.consts, *args)

    def __str__(self) -> str:
        return str(self.jaxpr)

    __repr__ = __str__

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(str(self))


class _Printer:
    """Names variables a, b, ..., z, ba, bb, ... in order of appearance, as JAX does; `fixed` gives some
    variables (by id) names of their own, which the generated names skip."""

    def __init__(self, fixed: dict[int, str] | None = None):
        self.names: dict[int, str] = dict(fixed or {})
        self._taken, self._count = set(self.names.values()), 0

    def name(self, v) -> str:
        if isinstance(v, Literal):
            return repr(v)
        found = self.names.get(id(v))
        if found is not None:
            return found
        while found is None or found in self._taken:
            n, found = self._count, ""
            self._count += 1
            while True:
                found = chr(ord("a") + n % 26) + found
                n = n // 26
                if n == 0:
                    break
        self.names[id(v)] = found
        return found

    def binder(self, v: Var) -> str:
        return f"{self.name(v)}:{v.aval.str_short()}"

    def jaxpr(self, j: Jaxpr, indent: int) -> str:
        """The jaxpr's text; its first line starts at the caller's column, later lines at `indent`."""
        pad = " " * indent
        consts = " ".join(self.binder(v) for v in j.constvars)
        ins = " ".join(self.binder(v) for v in j.invars)
        lines = [f"{{ lambda {consts}; {ins}. let"]
        lines += [self.eqn(e, indent + 4) for e in j.eqns]
        outs = ", ".join(self.name(v) for v in j.outvars)
        lines.append(f"{pad}  in ({outs}{',' if len(j.outvars) == 1 else ''}) }}")
        return "\n".join(lines)

    def eqn(self, e: Eqn, indent: int) -> str:
        """`outs = prim[params] ins`; params holding jaxprs go one per line, as JAX prints them."""
        pad = " " * indent
        lhs = " ".join(self.binder(v) for v in e.outvars)
        args = " ".join(self.name(x) for x in e.inputs)
        items = sorted(e.params.items())
        if not any(_holds_jaxpr(v) for _, v in items):
            params = "[" + ", ".join(f"{k}={self.param(v, indent)}" for k, v in items) + "]" if items else ""
            return f"{pad}{lhs} = {e.prim.name}{params} {args}".rstrip()
        lines = [f"{pad}{lhs} = {e.prim.name}["]
        lines += [f"{pad}  {k}={self.param(v, indent + 2)}" for k, v in items]
        lines.append(f"{pad}] {args}".rstrip())
        return "\n".join(lines)

    def param(self, v: Any, indent: int) -> str:
        if isinstance(v, ClosedJaxpr):
            return self.jaxpr(v.jaxpr, indent)
        if isinstance(v, Jaxpr):
            return self.jaxpr(v, indent)
        if isinstance(v, (tuple, list)) and any(_holds_jaxpr(x) for x in v):
            inner = " " * (indent + 2)
            items = [inner + self.param(x, indent + 2) for x in v]
            return "(\n" + "\n".join(items) + "\n" + " " * indent + ")"
        if hasattr(v, "name") and type(v).__name__ == "dtype":
            return v.name
        if type(v).__name__ == "device":
            return str(v)
        return repr(v)


def _holds_jaxpr(v) -> bool:
    if isinstance(v, (Jaxpr, ClosedJaxpr)):
        return True
    return isinstance(v, (tuple, list)) and any(_holds_jaxpr(x) for x in v)


def eval_jaxpr(jaxpr: Jaxpr, consts, *args) -> list:
    """Run `jaxpr` on `args` by binding each equation's primitive; returns the list of outputs."""
    if len(args) != len(jaxpr.invars):
        raise FnxRuntimeError(f"eval_jaxpr: expected {len(jaxpr.invars)} arguments, got {len(args)}")
    env: dict[int, Any] = {}
    for v, x in zip(jaxpr.constvars, consts):
        env[id(v)] = x
    for v, x in zip(jaxpr.invars, args):
        env[id(v)] = x

    def read(a):
        return a.val if isinstance(a, Literal) else env[id(a)]

    for e in jaxpr.eqns:
        outs = e.prim.bind(*[read(a) for a in e.inputs], **e.params)
        if not e.prim.multiple_results:
            outs = [outs]
        for v, o in zip(e.outvars, outs):
            env[id(v)] = o
    return [read(v) for v in jaxpr.outvars]


def verify_jaxpr(jaxpr: Jaxpr | ClosedJaxpr) -> None:
    """Check SSA form, types and nesting; raise FnxRuntimeError naming the first broken equation.

    Every variable is bound once before use; every equation's output avals are what its primitive's
    abstract rule gives for its input avals; literals are scalars of their stated type; jaxprs held in
    params (cond branches, loop bodies) are closed and verified in turn; a closed jaxpr's constants match
    its constvars.
    """
    if isinstance(jaxpr, ClosedJaxpr):
        j = jaxpr.jaxpr
        if len(jaxpr.consts) != len(j.constvars):
            raise FnxRuntimeError(f"verify_jaxpr: {len(j.constvars)} constvars but {len(jaxpr.consts)} constants")
        for v, c in zip(j.constvars, jaxpr.consts):
            if c.aval != v.aval:
                raise FnxRuntimeError(f"verify_jaxpr: constant {c.aval} bound to constvar of type {v.aval}")
        jaxpr = j
    defined: set[int] = set()

    def bind(v, where: str) -> None:
        if not isinstance(v, Var):
            raise FnxRuntimeError(f"verify_jaxpr: {where} binds {v!r}, which is not a Var")
        if id(v) in defined:
            raise FnxRuntimeError(f"verify_jaxpr: variable {v} bound twice ({where})")
        defined.add(id(v))

    for v in list(jaxpr.constvars) + list(jaxpr.invars):
        bind(v, "the jaxpr's inputs")
    for i, e in enumerate(jaxpr.eqns):
        where = f"equation {i} ({e.prim.name})"
        for a in e.inputs:
            _check_atom(a, defined, where)
        try:
            expected = e.prim.abstract(*[a.aval for a in e.inputs], **e.params)
        except Exception as exc:
            raise FnxRuntimeError(f"verify_jaxpr: {where}: its abstract rule rejects the inputs "
                                  f"{[a.aval for a in e.inputs]}: {exc}") from exc
        expected = list(expected) if e.prim.multiple_results else [expected]
        got = [v.aval for v in e.outvars]
        if expected != got:
            raise FnxRuntimeError(f"verify_jaxpr: {where} has output avals {got}, but its abstract rule gives "
                                  f"{expected}")
        for sub in _nested_jaxprs(e.params.values()):
            verify_jaxpr(sub)
        for v in e.outvars:
            bind(v, where)
    for v in jaxpr.outvars:
        _check_atom(v, defined, "the jaxpr's outputs")


def _check_atom(a, defined: set, where: str) -> None:
    if isinstance(a, Literal):
        if getattr(a.val, "aval", None) != a.aval or a.aval.ndim != 0:
            raise FnxRuntimeError(f"verify_jaxpr: {where} has a literal {a!r} that is not a scalar of its type")
    elif not isinstance(a, Var):
        raise FnxRuntimeError(f"verify_jaxpr: {where} uses {a!r}, which is neither a Var nor a Literal")
    elif id(a) not in defined:
        raise FnxRuntimeError(f"verify_jaxpr: {where} uses an undefined variable {a}")


def _nested_jaxprs(values):
    for v in values:
        if isinstance(v, (Jaxpr, ClosedJaxpr)):
            yield v
        elif isinstance(v, (tuple, list)):
            yield from _nested_jaxprs(v)
