"""``fluid.optimizer``: gradgen's optimizers under Paddle Fluid's names and arguments.

``SGDOptimizer``, ``MomentumOptimizer``, ``AdagradOptimizer``, ``AdamOptimizer``,
``RMSPropOptimizer`` and ``LambOptimizer`` (and the short names ``SGD``,
``Momentum``, ``Adagrad``, ``Adam``, as Paddle aliases them) take Paddle's
``regularization=fluid.regularizer.L2Decay(c)`` and
``grad_clip=fluid.clip.GradientClipByGlobalNorm(n)`` and, as Paddle does, clip
the gradients before adding the L2 term. Fluid had no AdamW: gradgen's
``AdamW`` (like ``RMSProp`` and ``Lamb``) is here under its own name.
"""
from __future__ import annotations

from gradgen.program.errors import ProgramError

from ..optimizer import Adagrad as _Adagrad, Adam as _Adam, AdamW, Lamb, Momentum as _Momentum, Optimizer, RMSProp
from ..optimizer import SGD as _SGD
from .clip import GradientClipByGlobalNorm
from .regularizer import L2Decay

__all__ = ["Optimizer", "SGDOptimizer", "MomentumOptimizer", "AdagradOptimizer", "AdamOptimizer", "RMSPropOptimizer",
           "LambOptimizer", "SGD", "Momentum", "Adagrad", "Adam", "AdamW", "RMSProp", "Lamb"]


class _PaddleArguments:
    """Paddle's ``regularization`` and ``grad_clip`` objects, as gradgen's ``weight_decay`` and ``grad_clip``."""

    clip_before_decay = True

    def __init__(self, *args, regularization: L2Decay | None = None,
                 grad_clip: GradientClipByGlobalNorm | None = None, **kw):
        if regularization is not None and not isinstance(regularization, L2Decay):
            raise ProgramError(f"regularization must be fluid.regularizer.L2Decay, got {type(regularization).__name__}")
        if grad_clip is not None and not isinstance(grad_clip, GradientClipByGlobalNorm):
            raise ProgramError(f"grad_clip must be fluid.clip.GradientClipByGlobalNorm, got {type(grad_clip).__name__}")
        if regularization is not None:
            kw["weight_decay"] = regularization.regularization_coeff
        if grad_clip is not None:
            kw["grad_clip"] = grad_clip.clip_norm
        super().__init__(*args, **kw)


class SGDOptimizer(_PaddleArguments, _SGD):
    """Paddle's SGDOptimizer(learning_rate, regularization, grad_clip)."""


class MomentumOptimizer(_PaddleArguments, _Momentum):
    """Paddle's MomentumOptimizer(learning_rate, momentum, use_nesterov, regularization, grad_clip)."""


class AdagradOptimizer(_PaddleArguments, _Adagrad):
    """Paddle's AdagradOptimizer(learning_rate, epsilon=1e-6, initial_accumulator_value=0.0, ...)."""


class AdamOptimizer(_PaddleArguments, _Adam):
    """Paddle's AdamOptimizer(learning_rate=0.001, beta1, beta2, epsilon, regularization, grad_clip)."""


class RMSPropOptimizer(_PaddleArguments, RMSProp):
    """Paddle's RMSPropOptimizer(learning_rate, rho=0.95, epsilon=1e-6, momentum=0.0, centered=False, ...).

    The update is torch.optim.RMSprop's: epsilon is added to the root of the mean square where Paddle's
    kernel adds it under the root, and the learning rate scales the step where Paddle folds it into the
    moment (the same path for a constant rate; the epsilons differ while the mean square is near epsilon).
    """


class LambOptimizer(_PaddleArguments, Lamb):
    """Paddle's LambOptimizer(learning_rate=0.001, lamb_weight_decay=0.01, beta1, beta2, epsilon=1e-6, ...)."""


SGD, Momentum, Adagrad, Adam = SGDOptimizer, MomentumOptimizer, AdagradOptimizer, AdamOptimizer
