"""The numpy backend: an interpreter of numpy kernels, one op (or one fused region) at a time.

``runner.NumpyRunner`` is the executor's side: plans (``plan``, ``plan_data``) cached per program, the run loop
(``run``), buffers (``buffers``), the kernels (``kernels/``), regions and their compiles (``fuse_region``,
``compile_queue``, ``jit``), the in-place tail (``in_place``), the BLAS (``blas``), the per-op checks (``checks``).
design_docs/executor.md describes it.
"""
