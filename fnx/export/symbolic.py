"""Symbolic dimensions: `Dim`, an integer polynomial over named dimensions such as `batch*seq*64 + 1`.

An exported program's shapes and integer parameters are ints or `Dim`s. A `Dim` is never a constant (the
arithmetic returns a plain int when the symbols cancel), so `isinstance(d, Dim)` tells a symbolic entry
from a static one. Dims print as expanded polynomials (`batch*seq*64 + seq - 1`), which `Dim.parse` reads
back, and `c_expr()` writes the same polynomial as a C expression over `int64_t` variables named as the
symbols.
"""
from __future__ import annotations

import re
from typing import Mapping, Union

from ..core import FnxValueError
from ..ir import Literal

__all__ = ["Dim", "DimLiteral", "evaluate", "SYMBOL"]

SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")   # a symbol's name: a C and Python identifier
_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|([-+*]))")

Monomial = tuple   # sorted symbol names, a name repeated for each power: ("seq", "seq") is seq**2
IntOrDim = Union[int, "Dim"]


class Dim:
    """An integer polynomial over symbols: +, -, * with ints and Dims, `//` by an int that divides every
    coefficient, equality, `evaluate(env)`, `str()` (`batch*seq*64`), `Dim.parse` and `c_expr()`."""

    __slots__ = ("terms", "_hash")

    def __init__(self, terms: Mapping[Monomial, int]):
        """Prefer `Dim.symbol`, `Dim.parse` and arithmetic; `terms` maps monomials to nonzero int coefficients
        and holds at least one non-constant monomial."""
        self.terms = dict(sorted(terms.items(), key=lambda kv: (-len(kv[0]), kv[0])))
        self._hash = hash(tuple(self.terms.items()))

    # ---------------------------------------------------------------- construction
    @staticmethod
    def symbol(name: str) -> Dim:
        """The polynomial `name`."""
        if not isinstance(name, str) or not SYMBOL.fullmatch(name):
            raise FnxValueError(f"Dim: a symbol's name is an identifier (letters, digits, '_', at most 64 "
                                f"characters, not starting with a digit), got {name!r}")
        return Dim({(name,): 1})

    @staticmethod
    def make(terms: Mapping[Monomial, int]) -> IntOrDim:
        """The polynomial with these coefficients (zeros dropped): an int when it is constant."""
        kept = {tuple(sorted(m)): int(c) for m, c in terms.items() if c}
        if not any(kept):
            return kept.get((), 0)
        return Dim(kept)

    @staticmethod
    def parse(text: str) -> IntOrDim:
        """Read what `str()` writes: a sum of terms `[-]factor*factor*...`, each factor an int or a symbol."""
        if not isinstance(text, str) or len(text) > 4096:
            raise FnxValueError(f"Dim.parse: expected a polynomial's text, got {text!r:.80}")
        pos, sign, total, term, coeff, expect_factor = 0, 1, {}, [], 1, True
        for m in _TOKEN.finditer(text):
            if m.start() != pos:
                break
            pos = m.end()
            number, name, op = m.groups()
            if expect_factor:
                if op == "-" and not term and coeff == 1:
                    sign = -sign
                    continue
                if number is not None:
                    coeff *= int(number)
                elif name is not None:
                    term.append(name)
                else:
                    raise FnxValueError(f"Dim.parse: unexpected {op!r} in {text!r}")
                expect_factor = False
            elif op == "*":
                expect_factor = True
            elif op is not None and op in "+-":
                key = tuple(sorted(term))
                total[key] = total.get(key, 0) + sign * coeff
                sign, term, coeff, expect_factor = (1 if op == "+" else -1), [], 1, True
            else:
                raise FnxValueError(f"Dim.parse: expected an operator in {text!r}, got {m.group().strip()!r}")
        if pos != len(text.rstrip()) or expect_factor:
            raise FnxValueError(f"Dim.parse: {text!r} is not a polynomial such as 'batch*seq*64 + 1'")
        key = tuple(sorted(term))
        total[key] = total.get(key, 0) + sign * coeff
        for m in total:
            for name in m:
                Dim.symbol(name)   # checks the name
        return Dim.make(total)

    # ---------------------------------------------------------------- arithmetic
    @staticmethod
    def _terms(x) -> dict:
        if isinstance(x, Dim):
            return x.terms
        if isinstance(x, int) and not isinstance(x, bool):
            return {(): x} if x else {}
        raise TypeError(f"Dim arithmetic takes ints and Dims, got {type(x).__name__}")

    def __add__(self, other) -> IntOrDim:
        out = dict(self.terms)
        for m, c in self._terms(other).items():
            out[m] = out.get(m, 0) + c
        return Dim.make(out)

    __radd__ = __add__

    def __neg__(self) -> Dim:
        return Dim({m: -c for m, c in self.terms.items()})

    def __sub__(self, other) -> IntOrDim:
        return self + (-other)

    def __rsub__(self, other) -> IntOrDim:
        return (-self) + other

    def __mul__(self, other) -> IntOrDim:
        out: dict = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in self._terms(other).items():
                m = tuple(sorted(m1 + m2))
                out[m] = out.get(m, 0) + c1 * c2
        return Dim.make(out)

    __rmul__ = __mul__

    def __floordiv__(self, other: int) -> IntOrDim:
        if not isinstance(other, int) or isinstance(other, bool) or other == 0:
            raise TypeError(f"Dim // {other!r}: a symbolic dimension divides only by a nonzero int")
        if any(c % other for c in self.terms.values()):
            raise FnxValueError(f"({self}) // {other} is not exact for every value of {', '.join(self.symbols)}")
        return Dim.make({m: c // other for m, c in self.terms.items()})

    def __eq__(self, other) -> bool:
        return isinstance(other, Dim) and self.terms == other.terms

    def __hash__(self) -> int:
        return self._hash

    # ---------------------------------------------------------------- reading
    @property
    def symbols(self) -> tuple:
        """The symbols the polynomial uses, sorted."""
        return tuple(sorted({s for m in self.terms for s in m}))

    def evaluate(self, env: Mapping[str, int]) -> int:
        """The polynomial's value for the symbols' values in `env`."""
        total = 0
        for m, c in self.terms.items():
            for name in m:
                c *= env[name]
            total += c
        return total

    def is_symbol(self) -> bool:
        """True for a bare symbol such as `batch` (what an input's symbolic dimension is)."""
        return len(self.terms) == 1 and next(iter(self.terms.items()))[1] == 1 and len(next(iter(self.terms))) == 1

    def __str__(self) -> str:
        return self._render(lambda c: str(c))

    __repr__ = __str__   # jaxprs print params with repr: `reshape[shape=(batch, seq*64)]`

    def c_expr(self) -> str:
        """The polynomial in C99 over `int64_t` variables named as the symbols, e.g. `(batch*seq*64 + seq - 1)`."""
        return "(" + self._render(lambda c: str(c) if abs(c) < 2 ** 31 else f"INT64_C({c})") + ")"

    def _render(self, number) -> str:
        parts = []
        for m, c in self.terms.items():
            factors = list(m) + ([number(abs(c))] if abs(c) != 1 or not m else [])
            text = "*".join(factors)
            if not parts:
                parts.append(text if c > 0 else "-" + text)
            else:
                parts.append(("+ " if c > 0 else "- ") + text)
        return " ".join(parts)


def evaluate(d: IntOrDim, env: Mapping[str, int]) -> int:
    """`d` (an int or a Dim) for the symbols' values in `env`."""
    return d.evaluate(env) if isinstance(d, Dim) else d


class DimLiteral(Literal):
    """A scalar literal whose value is a symbolic dimension `dim` (or, with `reciprocal`, 1/dim) in the literal's
    dtype: the `n` of `sum(x) / n` in a mean over a dynamic axis. `val` is None; `value(env)` gives the number."""

    __slots__ = ("dim", "reciprocal")

    def __init__(self, dim: Dim, reciprocal: bool, aval):
        super().__init__(None, aval)
        self.dim, self.reciprocal = dim, reciprocal

    @staticmethod
    def value_of(dim: IntOrDim, reciprocal: bool, env: Mapping[str, int]) -> float | int:
        n = evaluate(dim, env)
        return 1.0 / n if reciprocal else n

    def value(self, env: Mapping[str, int]) -> float | int:
        """The number for the symbols' values in `env` (before the cast to the literal's dtype)."""
        return self.value_of(self.dim, self.reciprocal, env)

    def c_expr(self) -> str:
        """The value in C: `(double)1 / (double)(n)` or `(n)`, over `int64_t` symbols (cast it to the dtype)."""
        return f"((double)1 / (double){self.dim.c_expr()})" if self.reciprocal else self.dim.c_expr()

    def __repr__(self) -> str:
        return f"{'1/' if self.reciprocal else ''}({self.dim}):{self.aval.str_short()}"
