"""`jax` in a process started afresh by a program that runs with fnx standing in for jax.

`install_jax_alias()` puts this package's folder first on sys.path, and processes started with spawn or
forkserver copy the parent's sys.path before they re-import the main script. Their first `import jax` finds
this package, which installs the alias in that process too and hands over to it.
"""
import sys

from fnx.jax_alias import install_jax_alias

del sys.modules[__name__]  # this package stands in for nothing: the alias answers `jax` from here on
install_jax_alias()
sys.modules[__name__] = __import__(__name__)
