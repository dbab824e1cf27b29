"""ONNX export: ``tg.onnx.export(model, args, "model.onnx", ...)``, after ``torch.onnx.export``.

The exported file runs in any ONNX runtime (onnxruntime, TensorRT, a browser) with
no Python and no teachgrad. Needs the ``onnx`` extra: ``pip install 'teachgrad[onnx]'``.
"""
from __future__ import annotations

from .export import DEFAULT_OPSET, UnsupportedOperatorError, export

__all__ = ["DEFAULT_OPSET", "UnsupportedOperatorError", "export"]
