"""fnx standing in for `jax`: unmodified JAX programs import fnx when they import jax.

`install_jax_alias()` puts a finder first on `sys.meta_path` that answers `import jax` and every `import jax.X.Y`
with the fnx module of the same path (`jax.numpy` is `fnx.numpy`, `jax.lax` is `fnx.lax`, `jax.random` is
`fnx.random`, `jax.example_libraries.stax` is `fnx.example_libraries.stax`, ...); `jax` itself is
fnx/_jax.py (`jit`, `grad`, `vmap`, ..., `config`, `Array`), and `jax.tree` (`jax.tree.map`, ...) is
fnx/_jax_tree.py. As with the torch alias (the machinery is fnx/_alias.py's), a name fnx lacks raises an
AttributeError or ImportError saying that fnx stands in for jax, `import fnx` is unchanged by the alias, and
`python -m fnx run --jax SCRIPT` installs it and runs the script.
"""
from __future__ import annotations

import os

from ._alias import Alias

__all__ = ["install_jax_alias", "run_script"]

_JAX = Alias(
    "jax", "JAX",
    renamed={"jax": "fnx._jax", "jax.config": "fnx._jax_config", "jax.tree": "fnx._jax_tree"},
    help="use what fnx offers instead (docs/porting-from-jax.md lists the differences), or run the program with "
         "real JAX (plain `python`, without `-m fnx run --jax` / fnx.install_jax_alias())",
    shim=os.path.join(os.path.dirname(os.path.abspath(__file__)), "_jax_shim"),
    install_name="install_jax_alias", run_command="python -m fnx run --jax SCRIPT")


def install_jax_alias() -> None:
    """Make `import jax` and every `import jax.X.Y` in this process give fnx (notebooks: call it first).

    Refuses with an error when real JAX is already imported, since the program would then mix the two; calling
    it again does nothing. `python -m fnx run --jax SCRIPT` calls it for you.
    """
    _JAX.install()


def run_script(path: str, args: list[str]) -> None:
    """Run the Python file `path` as `__main__` with `sys.argv = [path, *args]` and fnx standing in for jax, as
    `python path args...` runs it under JAX (its directory first on sys.path)."""
    _JAX.run_script(path, args)
