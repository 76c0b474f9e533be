"""Code generation: C headers and model tables (emit), TFLite Micro offline
plans, firmware projects. Imports only plan, passes, model, kernels."""
