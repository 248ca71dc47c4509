"""Exporters: ONNX graphs per prefix, manifest (with schema), generated C model.

`register_skl2onnx()` registers the skl2onnx converters for the edgeseq estimators. It is explicit
(not done on import) because importing skl2onnx costs about a second, and runtimes that only read an
export directory import this package too.
"""


def register_skl2onnx() -> list[str]:
    """Register skl2onnx shape calculators + converters for AnytimeRegressor (/Classifier); idempotent."""
    from edgeseq.export.skl2onnx_converter import register_skl2onnx as _register
    return _register()


__all__ = ["register_skl2onnx"]
