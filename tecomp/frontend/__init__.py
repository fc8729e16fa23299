"""Model importers: ``from_onnx`` turns an ONNX model into a graph and its weights."""

from .onnx import ModelError, from_onnx

__all__ = ["ModelError", "from_onnx"]
