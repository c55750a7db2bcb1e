"""What every backend works out the same way, in one place: each engine imports it from here, never from another
engine's folder.

The analyses of a run: its names (``signature``), whether a value conforms to its var's declared type
(``conformance``), which ops a gradient loop may read back from its forward loop (``loop_read_back``). The op
helpers both engines read an op with, grouped by the family file names of ``numpy/kernels/`` and
``xla/lowerings/`` (``conv``, ``creation``, ``manipulation``, ``metrics``, ``nn``, ``optimizer``, ...): the attrs
read one way, host-side draws, formulas written once over an array module ``xp``. And ``tables``, which gathers an
engine's table from its family modules.

Nothing here imports an engine (numpy the library, yes; jax, no), so every backend can import all of it.
"""
