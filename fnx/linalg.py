"""`fnx.linalg` (being written)."""
