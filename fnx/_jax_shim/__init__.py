"""A folder for sys.path holding only a `jax` package that installs fnx's jax alias (see jax/__init__.py)."""
