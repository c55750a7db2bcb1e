"""Softmax and loss layers."""
from __future__ import annotations

from ..errors import ProgramError
from ..ops.nn import IGNORE_INDEX
from ..variable import Variable
from .helper import append, check_var
from .naming import named


@named
def softmax(x: Variable, axis: int = -1, name=None) -> Variable:
    return append("softmax", {"X": check_var(x, "x")}, {"axis": axis}, name=name)


@named
def log_softmax(x: Variable, axis: int = -1, name=None) -> Variable:
    return append("log_softmax", {"X": check_var(x, "x")}, {"axis": axis}, name=name)


_REDUCTIONS = ("none", "mean", "sum")


def _check_reduction(reduction: str) -> None:
    """Before any op is appended, so a bad argument leaves the program as it was."""
    if reduction not in _REDUCTIONS:
        raise ProgramError(f"reduction must be one of {list(_REDUCTIONS)}, got {reduction!r}")


def _reduced(loss: Variable, label: Variable, soft_label: bool, ignore_index: int, reduction: str) -> Variable:
    """``loss`` per row as it is ("none"), summed, or averaged over the rows whose label is not ``ignore_index``
    (as Paddle's and PyTorch's ``cross_entropy`` do; every row ignored gives 0 / 0 = NaN, as there)."""
    if reduction == "none":
        return loss
    if reduction == "mean" and soft_label:  # every row counts
        return append("mean", {"X": loss})
    total = append("reduce_sum", {"X": loss}, {"reduce_all": True})
    if reduction == "sum":
        return total
    ignored = append("fill_any_like", {"X": label}, {"value": float(ignore_index)}, stop_gradient=True)
    kept = append("cast", {"X": append("not_equal", {"X": label, "Y": ignored}, stop_gradient=True)},
                  {"out_dtype": loss.dtype}, stop_gradient=True)
    count = append("reduce_sum", {"X": kept}, {"reduce_all": True}, stop_gradient=True)
    return append("elementwise_div", {"X": total, "Y": count})


@named
def cross_entropy(input: Variable, label: Variable, soft_label: bool = False, ignore_index: int = IGNORE_INDEX,
                  reduction: str = "none", name=None) -> Variable:
    """-log(input[label]) over the last axis of probabilities; the result keeps that axis with size 1.

    A hard label equal to ``ignore_index`` gives loss 0 and no gradient; any other label outside
    [0, classes) is a run-time error. ``reduction="mean"`` divides the sum by the rows kept.
    """
    _check_reduction(reduction)
    loss = append("cross_entropy", {"X": check_var(input, "input"), "Label": check_var(label, "label")},
                  {"soft_label": soft_label, "ignore_index": ignore_index},
                  name=name if reduction == "none" else None)
    return _reduced(loss, label, soft_label, ignore_index, reduction)


@named
def softmax_with_cross_entropy(logits: Variable, label: Variable, soft_label: bool = False, axis: int = -1,
                               return_softmax: bool = False, ignore_index: int = IGNORE_INDEX,
                               reduction: str = "none", name=None):
    """The cross-entropy of softmax(logits) with ``label``, in one stable op; ``(loss, softmax)`` if asked.

    A hard label equal to ``ignore_index`` gives loss 0 and no gradient; any other label outside
    [0, classes) is a run-time error. The loss has one value per row (the class axis kept as size 1), or
    with ``reduction`` "sum" their sum, "mean" their sum divided by the rows kept (Paddle's and PyTorch's
    ``cross_entropy``). With ``name``, the loss returned is ``name`` and the softmax ``name.softmax``.
    """
    _check_reduction(reduction)
    loss, softmax_out = append("softmax_with_cross_entropy",
                               {"Logits": check_var(logits, "logits"), "Label": check_var(label, "label")},
                               {"soft_label": soft_label, "axis": axis, "ignore_index": ignore_index},
                               out_slots=("Loss", "Softmax"), name=name if reduction == "none" else None,
                               side=name)
    loss = _reduced(loss, label, soft_label, ignore_index, reduction)
    return (loss, softmax_out) if return_softmax else loss


@named
def sigmoid_cross_entropy_with_logits(x: Variable, label: Variable, name=None) -> Variable:
    return append("sigmoid_cross_entropy_with_logits", {"X": check_var(x, "x"), "Label": check_var(label, "label")},
                  name=name)


__all__ = ["softmax", "log_softmax", "cross_entropy", "softmax_with_cross_entropy", "sigmoid_cross_entropy_with_logits"]
