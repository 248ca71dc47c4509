"""The layer-block kind (anytime neural networks): ONNX stage graphs, float C tables and their build, the export writer, read-back and verify."""
