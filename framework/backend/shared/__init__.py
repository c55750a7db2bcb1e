"""What every backend works out the same way, in one place: each engine imports it from here, never from another
engine's folder (``tests/framework/test_backend_layout.py``).

- The analyses of a run: its names (``signature``), whether a value conforms to its var's declared type
  (``conformance``), which ops a gradient loop may read back from its forward loop (``loop_read_back``).
- The op helpers both engines read an op with, in modules named as the families of ``numpy/kernels/`` and
  ``xla/lowerings/`` (``conv``, ``creation``, ``manipulation``, ``metrics``, ``network``, ``nn``, ``optimizer``,
  ``reduction``): attrs read one way, host-side random draws, formulas written once over an array module ``xp``;
  and ``attrs``, the readers of any op's axis and declared dtypes.
- ``tables``: how an engine gathers its table, op type -> entry, from its family modules.

Nothing here imports an engine (numpy the library, yes; jax, no), so every backend can import all of it.
"""
