"""Tests of the runtime: kernels, plans, buffers, the executor."""
