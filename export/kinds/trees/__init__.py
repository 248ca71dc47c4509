"""The tree-stage kind: ONNX stage graphs, float and int16 C tables, the export writer, read-back and verify."""
