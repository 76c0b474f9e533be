"""Building and running pyembed code on a Cortex-M (QEMU's MPS2 boards)."""
