"""The backward pass pauses the cyclic collector and leaves it as it found it."""
import gc

from gradgen.framework import append_backward
from gradgen.program import Program, layers, program_guard


def _build():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [3], "float64")
        w = layers.create_parameter([3], "float64", name="w")
        loss = layers.reduce_sum(layers.tanh(x * w))
    return main, loss


def test_the_collector_is_enabled_again_and_nothing_stays_frozen():
    main, loss = _build()
    assert gc.isenabled()
    with program_guard(main, Program()):
        append_backward(loss)
    assert gc.isenabled() and gc.get_freeze_count() == 0
    # the pass's ops went straight to the oldest generation: young collections will not rescan them
    last = main.global_block().ops[-1]
    assert any(o is last for o in gc.get_objects(generation=2))


def test_a_disabled_collector_stays_disabled_and_frozen_objects_stay_frozen():
    main, loss = _build()
    gc.disable()
    try:
        with program_guard(main, Program()):
            append_backward(loss)
        assert not gc.isenabled()
    finally:
        gc.enable()
    main, loss = _build()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with program_guard(main, Program()):
            append_backward(loss)
        # unfrozen, the count would be 0; a frozen object freed meanwhile (another test's background compile
        # thread may still be running in a full suite) lowers it by one, so a few may go
        assert frozen - 100 <= gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()
