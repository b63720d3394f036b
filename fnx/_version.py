"""fnx's version: a leaf module, so that any layer can read it (cache keys) without importing the package root."""
__version__ = "0.1.0"
