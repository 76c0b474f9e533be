"""Checks: fixed-point accuracy against float64, external bit-exact vectors,
HTML / Markdown reports."""
