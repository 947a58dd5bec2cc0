"""ONNX graph rewrites for ONNX Runtime, and the ONNX files the page paints with in the browser."""
