"""`torch.jit` in a PyTorch program that runs with fnx standing in for torch (fnx/torch_alias.py maps it here).

TorchScript turns a function or module into a program that runs without Python; what it computes is what the
Python code computes. Model files use it in passing (`@torch.jit.script` on a helper, `torch.jit.is_scripting()`
in timm's layers, `@torch.jit.ignore`, `torch.jit.Final` annotations), so here `script` and `trace` give back
the function or module itself, which fnx runs eagerly (as PyTorch does with `PYTORCH_JIT=0`), the decorators
return what they decorate and the queries answer False. A TorchScript archive (`torch.jit.save`, `load`) has
no fnx form: those raise NotImplementedError naming `fnx.export`, fnx's way to run a model without its Python
code. fnx's own `fnx.jit` is JAX's jit (fnx.compile), not this module.
"""
from __future__ import annotations

import typing
from typing import Any, Callable

from .nn import Module

__all__ = ["script", "trace", "trace_module", "script_if_tracing", "ignore", "unused", "export", "interface",
           "is_scripting", "is_tracing", "annotate", "Attribute", "Final", "fork", "wait", "freeze",
           "optimize_for_inference", "save", "load", "ScriptModule", "ScriptFunction"]

Final = typing.Final


class ScriptModule(Module):
    """TorchScript's compiled module type: nothing here is one (`script` returns the module itself), so
    `isinstance(m, torch.jit.ScriptModule)` is False, as for an unscripted PyTorch module."""


class ScriptFunction:
    """TorchScript's compiled function type: nothing here is one, as for `ScriptModule`."""


def script(obj: Any = None, optimize: Any = None, _frames_up: int = 0, _rcb: Any = None,
           example_inputs: Any = None) -> Any:
    """`obj` itself (a function, module or class): fnx runs its Python code eagerly."""
    return obj


def trace(func: Callable, example_inputs: Any = None, *args: Any, **kwargs: Any) -> Callable:
    """`func` itself (a function or module), not a recording of one call: the Python code runs on every call,
    so control flow that depends on the inputs stays right, where a trace would freeze the example's path."""
    return func


def trace_module(mod: Module, inputs: Any = None, *args: Any, **kwargs: Any) -> Module:
    """`mod` itself, as `trace` returns a module."""
    return mod


def script_if_tracing(fn: Callable) -> Callable:
    """`fn` itself (nothing is ever traced here)."""
    return fn


def ignore(drop: Any = False, **kwargs: Any) -> Any:
    """The decorated function itself, used bare (`@torch.jit.ignore`) or called (`@torch.jit.ignore(drop=True)`)."""
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn: Callable) -> Callable:
    """`fn` itself."""
    return fn


def export(fn: Callable) -> Callable:
    """`fn` itself (TorchScript compiles a module's exported methods besides forward; they are plain methods here)."""
    return fn


def interface(obj: Any) -> Any:
    """`obj` itself (a TorchScript interface is a plain class in Python)."""
    return obj


def is_scripting() -> bool:
    """False: code runs as Python, never compiled by TorchScript."""
    return False


def is_tracing() -> bool:
    """False: nothing is traced by torch.jit here."""
    return False


def annotate(the_type: Any, the_value: Any) -> Any:
    """`the_value`: a type hint for TorchScript, nothing in Python."""
    return the_value


def Attribute(value: Any, type: Any = None) -> Any:   # noqa: N802 (torch.jit's name)
    """`value`: TorchScript's typed module attribute is the value itself in Python, as in PyTorch without the JIT."""
    return value


class _Future:
    """What `fork` returns: its call's result, computed at once (the call runs synchronously)."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def wait(self) -> Any:
        return self.value


def fork(func: Callable, *args: Any, **kwargs: Any) -> _Future:
    """Run `func(*args, **kwargs)` now; `wait` gives its result (TorchScript's asynchronous fork runs
    synchronously in Python too)."""
    return _Future(func(*args, **kwargs))


def wait(future: _Future) -> Any:
    """The result of the call `fork` ran."""
    return future.wait()


def freeze(mod: Module, preserved_attrs: Any = None, optimize_numerics: bool = True) -> Module:
    """`mod` itself (freezing inlines a scripted module's parameters; fnx runs the module as it is)."""
    return mod


def optimize_for_inference(mod: Module, other_methods: Any = None) -> Module:
    """`mod` itself; `fnx.compile(mod)` is fnx's way to fuse and compile a model for speed."""
    return mod


def save(m: Any, f: Any, _extra_files: Any = None) -> None:
    """Not supported: a TorchScript archive holds TorchScript code."""
    raise NotImplementedError("torch.jit.save: fnx has no TorchScript archives; save the weights with "
                              "torch.save(model.state_dict(), path), or export the model with fnx.export.export "
                              "(save / save_c) to run it without its Python code")


def load(f: Any, map_location: Any = None, _extra_files: Any = None) -> Any:
    """Not supported: a TorchScript archive holds TorchScript code, which fnx cannot run."""
    raise NotImplementedError("torch.jit.load: fnx cannot load TorchScript archives; load a state_dict with "
                              "torch.load and model.load_state_dict, or a model exported with fnx.export")
