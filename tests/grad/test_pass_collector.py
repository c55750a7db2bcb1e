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


def test_programs_dropped_while_a_loop_builds_more_are_freed_without_a_collect_call(monkeypatch):
    """The pass moves its objects to the oldest generation, which CPython's own rule for full collections does not
    count (none in 400 programs built in a loop), so ``collector.paused`` counts them and makes the full collection
    once they pass ``FULL_WHEN_MOVED_OVER`` of the survivors: a dropped program (a cycle: its blocks know it) is
    freed while the loop goes on. The share made small here, so that a few passes reach it in any process."""
    import weakref

    from gradgen.framework.passes import collector

    monkeypatch.setattr(collector, "FULL_WHEN_MOVED_OVER", 1e-4)
    gc.collect()
    before = gc.get_stats()[2]["collections"]
    first, loss = _build()
    with program_guard(first, Program()):
        append_backward(loss)
    dropped = weakref.ref(first)
    del first, loss
    for _ in range(20):
        main, loss = _build()
        with program_guard(main, Program()):
            append_backward(loss)
        if dropped() is None:
            break
    assert dropped() is None, "a dropped program outlived 20 more backward passes"
    assert gc.get_stats()[2]["collections"] > before
