"""The IR interpreter backend: run a jaxpr op by op on concrete tensors.

It is the oracle that generated code is tested against, and the fallback wherever code generation is
unavailable. Its semantics are `eval_jaxpr`'s with eager binding: each equation runs its primitive's
impl. To keep small calls cheap, the jaxpr is first flattened into a list of steps over array slots, so a
call runs the impls directly, without building a Tensor per intermediate value; should a step fail, the
call is repeated through `eval_jaxpr`, whose `bind` phrases the error as eager mode does.

It runs in plain eager mode whatever transforms are active around the call (the caller hands it concrete
tensors), with autograd recording off: a compiled call is differentiated through its own rules, never
through the ops inside it.
"""
from __future__ import annotations

import numpy as np

from .. import core
from ..ir import ClosedJaxpr, Literal, eval_jaxpr
from ..tensor import Tensor, make

__all__ = ["Interpreted", "run_eagerly"]


def run_eagerly(fn, *args):
    """`fn(*args)` with the trace stack and autograd recording switched off (concrete tensors only)."""
    saved = core.enter_eager_mode()
    try:
        return fn(*args)
    finally:
        core.leave_eager_mode(saved)


class Interpreted:
    """An Executable that evaluates `closed` equation by equation."""

    __slots__ = ("closed", "_slots", "_first_arg", "_steps", "_outs")

    def __init__(self, closed: ClosedJaxpr):
        self.closed = closed
        j = closed.jaxpr
        index: dict[int, int] = {}
        self._slots: list = []          # the initial environment: constants and literals filled in

        def slot_of(atom) -> int:
            if isinstance(atom, Literal):
                self._slots.append(atom.val._value)
                return len(self._slots) - 1
            return index[id(atom)]

        def define(var, value=None) -> int:
            index[id(var)] = len(self._slots)
            self._slots.append(value)
            return index[id(var)]

        for v, c in zip(j.constvars, closed.consts):
            define(v, c._value)
        self._first_arg = len(self._slots)
        for v in j.invars:
            define(v)
        self._steps = []
        for e in j.eqns:
            ins = tuple(slot_of(a) for a in e.inputs)
            xp = e.inputs[0].aval.device.xp if e.inputs else np
            outs = tuple(define(v) for v in e.outvars)
            self._steps.append((e.prim.impl, xp, ins, e.params, outs, e.prim.multiple_results))
        # outputs that are constants or literals are copied, so that writing to one cannot change the executable
        self._outs = [(slot_of(v), v.aval.device, isinstance(v, Literal) or index.get(id(v), -1) < self._first_arg)
                      for v in j.outvars]

    def __call__(self, *args: Tensor) -> list[Tensor]:
        saved = core.enter_eager_mode()
        try:
            return self._run(args)
        except Exception:  # repeat through eval_jaxpr, which raises fnx's own error for the failing op
            return eval_jaxpr(self.closed.jaxpr, self.closed.consts, *args)
        finally:
            core.leave_eager_mode(saved)

    def _run(self, args) -> list[Tensor]:
        env = self._slots.copy()
        k = self._first_arg
        for a in args:
            env[k] = a._value
            k += 1
        ndarray = np.ndarray
        for impl, xp, ins, params, outs, multiple in self._steps:
            r = impl(xp, *[env[i] for i in ins], **params)
            if multiple:
                for i, o in zip(outs, r):
                    env[i] = o if type(o) is ndarray or not isinstance(o, np.generic) else np.asarray(o)
            else:
                env[outs[0]] = r if type(r) is ndarray or not isinstance(r, np.generic) else np.asarray(r)
        return [make(env[i].copy() if fixed else env[i], dev) for i, dev, fixed in self._outs]

    def kernels(self) -> list:
        return []

    def source(self) -> str:
        return ""

    def __repr__(self) -> str:
        return f"Interpreted({len(self._steps)} equations)"
