"""torch.onnx.errors: the exceptions of the ONNX exporter (PyTorch's names and bases)."""
from __future__ import annotations

__all__ = ["OnnxExporterError", "UnsupportedOperatorError"]


class OnnxExporterError(RuntimeError):
    """Raised when exporting a model to ONNX fails."""


class UnsupportedOperatorError(OnnxExporterError, NotImplementedError):
    """The model uses an operation (an fnx primitive) that the exporter has no ONNX form for; also a
    NotImplementedError."""
