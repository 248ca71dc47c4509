"""Exporters: ONNX graphs per prefix, manifest (with schema), generated C model."""
