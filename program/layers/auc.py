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

Built from ordinary ops (``scatter_add``, ``cumsum``, reductions); a metric
has no gradient: its outputs are marked ``stop_gradient``.
"""
from __future__ import annotations

from ..errors import ProgramError
from ..guard import default_main_program, default_startup_program
from ..variable import Variable
from .creation import assign, cast, fill_constant, zeros_like
from .helper import check_var
from .indexing import scatter_add
from .logic import not_equal
from .manipulation import cumsum, reshape, slice
from .math import add, clip, divide, maximum, multiply, scale, subtract
from .reduction import reduce_sum

COUNT_DTYPE = "float64"
"""The bucket counts' dtype: whole numbers exact up to 2**53 rows."""


def _counter(name: str, size: int) -> Variable:
    """A persistable var of ``size`` zeros (set by the startup program), updated by the main program's runs."""
    main, startup = default_main_program(), default_startup_program()
    var = main.global_block().create_var(name, [size], COUNT_DTYPE, persistable=True, stop_gradient=True)
    startup.global_block().create_var(name, [size], COUNT_DTYPE, persistable=True, stop_gradient=True)
    startup.global_block().append_op("fill_constant", {}, {"Out": [name]},
                                     {"shape": [size], "dtype": COUNT_DTYPE, "value": 0.0})
    return var


def _area(positives: Variable, negatives: Variable) -> Variable:
    """The ROC AUC of per-bucket counts (bucket i scores below bucket i + 1); 0 without both classes."""
    above = cumsum(positives, axis=0, reverse=True, exclusive=True)  # positives in higher buckets
    pairs = reduce_sum(multiply(negatives, add(above, scale(positives, 0.5))))
    total = multiply(reduce_sum(positives), reduce_sum(negatives))
    out = divide(pairs, maximum(total, fill_constant([], COUNT_DTYPE, 1.0)))
    out.stop_gradient = True
    return out


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
    if len(input.shape) == 2 and input.shape[1] == 2:
        input = slice(input, [1], [1], [2])
    elif not (len(input.shape) == 1 or (len(input.shape) == 2 and input.shape[1] == 1)):
        raise ProgramError(f"auc: input '{input.name}' must be [N, 2] class probabilities or [N, 1] / [N] "
                           f"positive probabilities, got {list(input.shape)}")
    base = name or default_main_program().unique_name("auc")
    scores = reshape(cast(input, COUNT_DTYPE), [-1])
    bucket = cast(clip(scale(scores, float(num_thresholds)), 0.0, float(num_thresholds)), "int64")
    positive = cast(not_equal(reshape(label, [-1]), zeros_like(reshape(label, [-1]))), COUNT_DTYPE)
    empty = fill_constant([num_thresholds + 1], COUNT_DTYPE, 0.0)
    batch_pos = scatter_add(empty, bucket, positive)
    batch_neg = scatter_add(empty, bucket, subtract(fill_constant([], COUNT_DTYPE, 1.0), positive))
    stats = []
    for kind, batch in (("pos", batch_pos), ("neg", batch_neg)):
        stat = _counter(f"{base}.stat_{kind}", num_thresholds + 1)
        assign(add(stat, batch), output=stat)
        stats.append(stat)
    return _area(*stats), _area(batch_pos, batch_neg), stats


__all__ = ["COUNT_DTYPE", "auc"]
