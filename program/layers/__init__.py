"""``gradgen.program.layers``: functions that append ops to the current block and return their outputs.

Each family module's public layers are re-exported here; a module whose ``__all__`` also lists helpers
(constants, conversions) has its layers named one by one."""
from __future__ import annotations

from .auc import auc
from .control_flow import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403
from .creation import (assign, cast, create_parameter, data, fill_constant, gaussian_random, ones_like,
                       uniform_random, zeros_like)
from .custom import *  # noqa: F401,F403
from .indexing import *  # noqa: F401,F403
from .linalg import *  # noqa: F401,F403
from .logic import *  # noqa: F401,F403
from .loss import huber_loss, l1_loss, log_loss, mse_loss, smooth_l1, square_error_cost
from .lr_schedule import cosine_decay, exponential_decay, linear_lr_warmup, piecewise_decay
from .manipulation import *  # noqa: F401,F403
from .math import *  # noqa: F401,F403
from .metrics import accuracy, precision, recall
from .network import *  # noqa: F401,F403
from .nn import *  # noqa: F401,F403
from .recurrent import gru, lstm
from .reduction import *  # noqa: F401,F403
from . import control_flow, conv, custom, indexing, linalg, logic, manipulation, math, network, nn, reduction

__all__ = sorted([
    "auc",
    "assign", "cast", "create_parameter", "data", "fill_constant", "gaussian_random", "ones_like", "uniform_random",
    "zeros_like",
    "huber_loss", "l1_loss", "log_loss", "mse_loss", "smooth_l1", "square_error_cost",
    "cosine_decay", "exponential_decay", "linear_lr_warmup", "piecewise_decay",
    "accuracy", "precision", "recall",
    "gru", "lstm",
    *(name for module in (control_flow, conv, custom, indexing, linalg, logic, manipulation, math, network, nn,
                          reduction) for name in module.__all__),
])
