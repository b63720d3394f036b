"""Functional transforms: interpreters of the same primitives that eager mode runs."""
