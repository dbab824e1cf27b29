"""The exporter's error class, in a module of its own so that every translation module can
raise it without importing the writer."""
from __future__ import annotations


class UnsupportedOperatorError(RuntimeError):
    """The graph uses an operation the exporter cannot write as ONNX."""
