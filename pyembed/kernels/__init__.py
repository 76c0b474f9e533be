"""Kernels: the C kernel families' bindings, validated, with their numpy
references (fixed-point core, quantization, reverse pooling and convolution,
streaming attention and matching, layer objects and the stripe executor).
Imports only the foundation (errors, _validate) and pyembed._ext."""
