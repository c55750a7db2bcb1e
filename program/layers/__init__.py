"""``program.layers``: functions that append ops to the current block and return their outputs."""
from __future__ import annotations

from .control_flow import cond, while_loop
from .conv import conv2d, pool2d
from .creation import assign, cast, create_parameter, data, fill_constant, ones_like, zeros_like
from .linalg import matmul
from .logic import argmax, equal, greater_equal, greater_than, less_equal, less_than, not_equal, one_hot, where
from .manipulation import (broadcast_to, concat, gather, reshape, slice, split, squeeze, stack, sum, transpose,
                           unsqueeze)
from .math import (abs, add, clip, cos, divide, exp, gelu, leaky_relu, log, maximum, minimum, multiply, pow,
                   reciprocal, relu, scale, sigmoid, sign, sin, softplus, sqrt, square, subtract, tanh)
from .network import batch_norm, dropout, embedding, fc, layer_norm
from .nn import cross_entropy, log_softmax, sigmoid_cross_entropy_with_logits, softmax, softmax_with_cross_entropy
from .reduction import mean, reduce_max, reduce_mean, reduce_min, reduce_sum
