"""The optimizer updates both engines compute with the same formula, written once over an array module ``xp``
(numpy in the numpy kernels, ``jax.numpy`` in the xla lowerings, which cast the results to the declared dtypes).
Each is ``update(op, xp) -> run(param, grad, lr, *state) -> (param, *state)``."""
from __future__ import annotations

import numpy as np

__all__ = ["adagrad_update", "rmsprop_update"]


def rmsprop_update(op, xp=np):
    """torch.optim.RMSprop's update: epsilon added outside the root, the learning rate outside the moment."""
    rho, eps, mu, centered = op.attr("rho"), op.attr("epsilon"), op.attr("momentum"), op.attr("centered")

    def run(param, grad, lr, mean_square, mean_grad, moment):
        mean_square = rho * mean_square + (1.0 - rho) * grad * grad
        if centered:
            mean_grad = rho * mean_grad + (1.0 - rho) * grad
            avg = xp.sqrt(mean_square - mean_grad * mean_grad) + eps
        else:
            avg = xp.sqrt(mean_square) + eps
        moment = mu * moment + grad / avg
        return param - lr.reshape(()) * moment, mean_square, mean_grad, moment

    return run


def adagrad_update(op, xp=np):
    """The sum of squared gradients scales each coordinate's step."""
    eps = op.attr("epsilon")

    def run(param, grad, lr, moment):
        moment = moment + grad * grad
        return param - lr.reshape(()) * grad / (xp.sqrt(moment) + eps), moment

    return run
