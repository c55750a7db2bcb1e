"""Tests of the speed work (issue 15): the BLAS provider and fused elementwise kernels, for correctness only."""
