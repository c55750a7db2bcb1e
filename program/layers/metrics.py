"""Classification metrics as layers: precision and recall, binary or macro-averaged, built from ordinary ops.

A prediction is the class of the largest score (``argmax`` of the last
axis of ``input``, the first class on ties); scores need not be normalised.
Per class c: precision = true positives / predicted c, recall = true
positives / labelled c, each 0 when its denominator is 0 (scikit-learn's
``zero_division=0``). ``average="binary"`` reports class ``pos_label``;
``"macro"`` the unweighted mean over all classes. Metrics have no gradient:
``argmax`` and ``one_hot`` stop it, so ``append_backward`` never reaches
through them. (``accuracy`` with top-k is in ``loss.py``.)
"""
from __future__ import annotations

from ..errors import ProgramError
from ..variable import Variable
from .creation import fill_constant
from .helper import check_var
from .logic import argmax, one_hot
from .manipulation import reshape, slice
from .math import divide, maximum, multiply
from .reduction import reduce_mean, reduce_sum

AVERAGES = ("binary", "macro")


def _counts(input: Variable, label: Variable, average: str, pos_label: int) -> tuple[Variable, Variable, Variable]:
    """(true positives, predicted counts, labelled counts) per class, each ``input.dtype[C]``."""
    check_var(input, "input")
    check_var(label, "label")
    if average not in AVERAGES:
        raise ProgramError(f"average must be one of {', '.join(AVERAGES)}, got {average!r}")
    classes = input.shape[-1] if input.shape else -1
    if classes < 1:
        raise ProgramError(f"input '{input.name}' needs a known number of classes in its last dim, got "
                           f"{list(input.shape)}")
    if average == "binary" and not 0 <= pos_label < classes:
        raise ProgramError(f"pos_label {pos_label} is not one of the {classes} classes")
    predicted = one_hot(argmax(input, axis=-1), classes, input.dtype)
    labelled = one_hot(reshape(label, [-1]), classes, input.dtype)
    return (reduce_sum(multiply(predicted, labelled), dim=0), reduce_sum(predicted, dim=0),
            reduce_sum(labelled, dim=0))


def _score(hits: Variable, totals: Variable, average: str, pos_label: int, name) -> Variable:
    """hits / totals per class (0 where totals is 0), then the class ``pos_label``'s or their mean: a scalar."""
    per_class = divide(hits, maximum(totals, fill_constant([], totals.dtype, 1)))
    if average == "macro":
        out = reduce_mean(per_class, name=name)
    else:
        out = reshape(slice(per_class, [0], [pos_label], [pos_label + 1]), [], name=name)
    out.stop_gradient = True
    return out


def precision(input: Variable, label: Variable, average: str = "binary", pos_label: int = 1, name=None) -> Variable:
    """Of the rows predicted as a class, the fraction labelled so: class ``pos_label``'s, or the macro mean."""
    hits, predicted, _ = _counts(input, label, average, pos_label)
    return _score(hits, predicted, average, pos_label, name)


def recall(input: Variable, label: Variable, average: str = "binary", pos_label: int = 1, name=None) -> Variable:
    """Of the rows labelled as a class, the fraction predicted so: class ``pos_label``'s, or the macro mean."""
    hits, _, labelled = _counts(input, label, average, pos_label)
    return _score(hits, labelled, average, pos_label, name)


__all__ = ["AVERAGES", "precision", "recall"]
