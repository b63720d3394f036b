"""A folder for sys.path holding only a `torch` package that installs fnx's torch alias (see torch/__init__.py)."""
