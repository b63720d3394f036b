"""`jax.config` under fnx's jax alias: `jax.config.update(name, value)` for the options that mean something on
fnx, and reads of them (`jax.config.jax_enable_x64`). `from jax.config import config` (older JAX code) gives
this module too.

- `jax_enable_x64`: True makes float64 fnx's default float dtype (`fnx.set_default_dtype`), which is what
  x64 means to `fnx.numpy` too: Python floats and ints become float64 and int64 there, and numpy's 64-bit
  arrays are kept; False makes the default float32 again.
- `jax_platform_name`, `jax_platforms`: accepted and ignored; fnx runs each tensor on its own device.
- any other option: NotImplementedError naming it.
"""
from __future__ import annotations

import sys

from .dtypes import float32, float64, get_default_dtype, set_default_dtype

_IGNORED = {"jax_platform_name": "", "jax_platforms": ""}


def update(name: str, value) -> None:
    """Set the option `name` to `value` (see the module docstring for the options fnx has)."""
    if name == "jax_enable_x64":
        set_default_dtype(float64 if value else float32)
    elif name in _IGNORED:
        _IGNORED[name] = value
    else:
        raise NotImplementedError(f"jax.config.update({name!r}, ...): fnx stands in for jax in this program and "
                                  f"has no option {name!r}; it has jax_enable_x64 (the default float dtype), and "
                                  f"accepts jax_platform_name / jax_platforms (ignored). Remove the call, or run "
                                  f"the program with real JAX.")


def __getattr__(name: str):
    """Reads of the options: `jax.config.jax_enable_x64` is whether float64 is the default float dtype."""
    if name == "jax_enable_x64":
        return get_default_dtype() is float64
    if name in _IGNORED:
        return _IGNORED[name]
    raise AttributeError(f"jax.config has no option {name!r} under fnx (fnx stands in for jax in this program)")


config = sys.modules[__name__]   # `from jax.config import config` and `jax.config.config`
