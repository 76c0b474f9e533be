"""Graph rewrites between import and planning (fusion, stripe regions,
pattern recognition, segmentation). Imports only model and below."""
