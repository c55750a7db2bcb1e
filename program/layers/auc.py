"""``auc``: the area under the ROC curve, accumulated over runs in threshold buckets, as Paddle's ``layers.auc``.

Why buckets and not the exact batch AUC: the AUC Paddle users track is the
one over every batch seen so far, and an exact AUC over all batches would
need every past score. So, as Paddle does, each score p (the positive
class's probability) falls in bucket ``floor(p * num_thresholds)`` (clipped
to ``[0, num_thresholds]``), and two persistable vars count the positive
and negative rows per bucket across runs. The area is then the trapezoid
sum over buckets from the highest down: each negative row adds the
positives above its bucket plus half of those in it, so rows in one bucket
count as ties (half a pair), as the Mann-Whitney statistic counts equal
scores. With scores that differ by more than 1 / num_thresholds this is
the exact AUC. A label is positive when it is not 0 (Paddle's rule). With
no positive or no negative row yet, the AUC is 0.

One ``auc`` op (Paddle's, with this batch's AUC as a second output) reads and
updates the counters in place; a metric has no gradient: the op is
non-differentiable and its outputs are marked ``stop_gradient``.
"""
from __future__ import annotations

from ..errors import ProgramError
from ..guard import default_main_program, default_startup_program
from ..ops.metrics import COUNT_DTYPE, predict_problem
from ..variable import Variable
from .helper import check_var
from .naming import named


def _counter(name: str, size: int) -> Variable:
    """A persistable var of ``size`` zeros (set by the startup program), updated by the main program's runs."""
    main, startup = default_main_program(), default_startup_program()
    var = main.global_block().create_var(name, [size], COUNT_DTYPE, persistable=True, stop_gradient=True)
    startup.global_block().create_var(name, [size], COUNT_DTYPE, persistable=True, stop_gradient=True)
    startup.global_block().append_op("fill_constant", {}, {"Out": [name]},
                                     {"shape": [size], "dtype": COUNT_DTYPE, "value": 0.0})
    return var


@named
def auc(input: Variable, label: Variable, num_thresholds: int = 2 ** 12 - 1,
        name: str | None = None) -> tuple[Variable, Variable, list[Variable]]:
    """(AUC over every run so far, this batch's AUC, [positive counts, negative counts]) of scores ``input``.

    ``input`` is ``[N, 2]`` class probabilities (column 1 is the positive
    class's, as Paddle's) or ``[N, 1]`` / ``[N]`` positive probabilities;
    ``label`` is ``[N, 1]`` or ``[N]`` of any int dtype. The counts are
    persistable ``float64[num_thresholds + 1]`` vars that the startup
    program zeroes; run it again (or set them to zeros) to start afresh.
    """
    check_var(input, "input")
    check_var(label, "label")
    if not isinstance(num_thresholds, int) or num_thresholds < 1:
        raise ProgramError(f"auc needs num_thresholds >= 1, got {num_thresholds!r}")
    if predict_problem(input.shape):  # before the counters are made
        raise ProgramError(f"auc: input '{input.name}': {predict_problem(input.shape)}")
    base = name or default_main_program().unique_name("auc")
    stats = [_counter(f"{base}.stat_{kind}", num_thresholds + 1) for kind in ("pos", "neg")]
    block = default_main_program().current_block()
    outs = [block.create_var(out, [], COUNT_DTYPE, stop_gradient=True)
            for out in (name or f"{base}.auc", f"{base}.batch_auc")]
    block.append_op("auc", {"Predict": [input], "Label": [label], "StatPos": [stats[0]], "StatNeg": [stats[1]]},
                    {"AUC": [outs[0]], "BatchAUC": [outs[1]], "StatPosOut": [stats[0]], "StatNegOut": [stats[1]]},
                    {"num_thresholds": num_thresholds})
    return outs[0], outs[1], stats


__all__ = ["COUNT_DTYPE", "auc"]
