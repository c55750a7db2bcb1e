"""Classification metrics: ``accuracy`` with top-k, precision and recall (binary or macro-averaged), one op each.

Scores need not be normalised; ``label`` is ``[N, 1]`` or ``[N]`` of int32 or
int64 class ids in ``[0, C)`` (another id is a run-time error). A class ranks
before another when its score is higher, or equal with a lower class index
(``top_k``'s order). Metrics have no gradient: their ops are
non-differentiable, so ``append_backward`` never reaches through them, and
their outputs are marked ``stop_gradient``. (``auc`` is in ``auc.py``.)
"""
from __future__ import annotations

from ..errors import ProgramError
from ..ops.metrics import AVERAGES, top_k_problem
from ..variable import Variable
from .helper import append, check_var
from .naming import named


@named
def accuracy(input: Variable, label: Variable, k: int = 1, name=None) -> Variable:
    """The fraction of rows whose integer ``label`` is among the ``k`` largest scores (last axis of ``input``).

    Paddle's ``fluid.layers.accuracy(input, label, k)``, as one ``accuracy`` op on ``[N, C]`` scores. On ties the
    lower class index ranks first, so with equal scores a row counts as a hit only when its label is among the
    first ``k`` tied classes. A 0-d value in ``input``'s dtype; NaN for an empty batch (the mean of nothing).
    """
    check_var(input, "input")
    check_var(label, "label")
    if not isinstance(k, int) or k < 1:
        raise ProgramError(f"accuracy needs k >= 1, got k={k!r}")
    if top_k_problem(k, input.shape):  # before the label's checks, as when the layer was built on top_k
        raise ProgramError(f"accuracy: input '{input.name}': {top_k_problem(k, input.shape)}")
    out, _, _ = append("accuracy", {"X": input, "Label": label}, {"k": k}, ("Accuracy", "Correct", "Total"), name,
                       stop_gradient=True)
    return out


def _precision_recall(input: Variable, label: Variable, average: str, pos_label: int, name, slot: str) -> Variable:
    """One ``precision_recall`` op; returns its ``slot`` output (both are computed from the same counts)."""
    check_var(input, "input")
    check_var(label, "label")
    if average not in AVERAGES:
        raise ProgramError(f"average must be one of {', '.join(AVERAGES)}, got {average!r}")
    slots = ("Precision", "Recall") if slot == "Precision" else ("Recall", "Precision")
    out, _ = append("precision_recall", {"X": input, "Label": label}, {"average": average, "pos_label": pos_label},
                    slots, name, stop_gradient=True)
    return out


@named
def precision(input: Variable, label: Variable, average: str = "binary", pos_label: int = 1, name=None) -> Variable:
    """Of the rows predicted as a class (their argmax, the first class on ties), the fraction labelled so: class
    ``pos_label``'s (``average="binary"``) or the unweighted mean over classes (``"macro"``); 0 for a class never
    predicted (scikit-learn's ``zero_division=0``). A 0-d value in ``input``'s dtype."""
    return _precision_recall(input, label, average, pos_label, name, "Precision")


@named
def recall(input: Variable, label: Variable, average: str = "binary", pos_label: int = 1, name=None) -> Variable:
    """Of the rows labelled as a class, the fraction predicted so (their argmax): class ``pos_label``'s or the macro
    mean, 0 for a class never labelled. A 0-d value in ``input``'s dtype."""
    return _precision_recall(input, label, average, pos_label, name, "Recall")


__all__ = ["AVERAGES", "accuracy", "precision", "recall"]
