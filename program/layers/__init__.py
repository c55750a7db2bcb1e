"""``program.layers``: functions that append ops to the current block and return their outputs."""
from __future__ import annotations

from .creation import assign, cast, create_parameter, data, fill_constant, ones_like, zeros_like
from .linalg import matmul
from .manipulation import broadcast_to, sum
from .math import (abs, add, clip, cos, divide, exp, gelu, leaky_relu, log, maximum, minimum, multiply, pow,
                   reciprocal, relu, scale, sigmoid, sign, sin, softplus, sqrt, square, subtract, tanh)
from .reduction import mean, reduce_max, reduce_mean, reduce_min, reduce_sum
