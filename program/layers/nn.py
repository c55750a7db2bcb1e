"""Softmax and loss layers."""
from __future__ import annotations

from ..variable import Variable
from .helper import append, check_var


def softmax(x: Variable, axis: int = -1, name=None) -> Variable:
    return append("softmax", {"X": check_var(x, "x")}, {"axis": axis}, name=name)


def log_softmax(x: Variable, axis: int = -1, name=None) -> Variable:
    return append("log_softmax", {"X": check_var(x, "x")}, {"axis": axis}, name=name)


def cross_entropy(input: Variable, label: Variable, soft_label: bool = False, name=None) -> Variable:
    """-log(input[label]) over the last axis of probabilities; the result keeps that axis with size 1."""
    return append("cross_entropy", {"X": check_var(input, "input"), "Label": check_var(label, "label")},
                  {"soft_label": soft_label}, name=name)


def softmax_with_cross_entropy(logits: Variable, label: Variable, soft_label: bool = False, axis: int = -1,
                               return_softmax: bool = False, name=None):
    """The cross-entropy of softmax(logits) with ``label``, in one stable op; ``(loss, softmax)`` if asked."""
    softmax_out, loss = append("softmax_with_cross_entropy",
                               {"Logits": check_var(logits, "logits"), "Label": check_var(label, "label")},
                               {"soft_label": soft_label, "axis": axis}, out_slots=("Softmax", "Loss"), name=name)
    return (loss, softmax_out) if return_softmax else loss


def sigmoid_cross_entropy_with_logits(x: Variable, label: Variable, name=None) -> Variable:
    return append("sigmoid_cross_entropy_with_logits", {"X": check_var(x, "x"), "Label": check_var(label, "label")},
                  name=name)


__all__ = ["softmax", "log_softmax", "cross_entropy", "softmax_with_cross_entropy", "sigmoid_cross_entropy_with_logits"]
