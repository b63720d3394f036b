"""`fnx.onnx` (torch.onnx under the torch alias): export a module or function to an ONNX model.

`fnx.onnx.export(model, args, "model.onnx")` traces the model with fnx.export's tracer and writes each
primitive of the program as ONNX operators (opset 17 by default, up to 21); the result is an `ONNXProgram`
that onnxruntime runs with the model's outputs. Needs the `onnx` package (pip install fnx[onnx]); calling an
ONNXProgram needs onnxruntime. See fnx/onnx/_ops.py for what each primitive becomes and which have no ONNX
form (they raise `errors.UnsupportedOperatorError`, a NotImplementedError naming the primitive).
"""
from __future__ import annotations

from . import errors
from ._export import ONNXProgram, OperatorExportTypes, TrainingMode, export, is_in_onnx_export
from .errors import OnnxExporterError

__all__ = ["export", "ONNXProgram", "TrainingMode", "OperatorExportTypes", "is_in_onnx_export", "OnnxExporterError",
           "errors"]
