"""Helpers for testing and benchmarking tecomp: whole ONNX models built with random weights
(:mod:`tecomp.testing.models`)."""
