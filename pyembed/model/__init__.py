"""The model: graph types, operator preparation, import from .tflite / ONNX,
the C graph runtime from Python, the float64 reference, and a .tflite writer.
Imports only kernels and below."""
