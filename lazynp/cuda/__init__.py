"""CUDA kernels (Numba CUDA), device memory (CuPy / the simulator) and device execution."""
