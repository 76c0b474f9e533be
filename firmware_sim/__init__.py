"""firmware_sim: a simulated microcontroller that runs pyembed's real C kernels
on simulated RAM and flash regions, with DMA, a cycle cost model and traces."""
