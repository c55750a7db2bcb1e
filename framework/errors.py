"""Run-time and compile-pass errors of ``framework``, under the project's ``GradgenError``."""
from __future__ import annotations

from gradgen.program.errors import GradgenError


class ExecutionError(GradgenError):
    """A program failed to run: a kernel raised, an input was missing, a value was not finite."""


class FeedError(ExecutionError):
    """A feed is missing, unknown, or does not match its var's declared shape or dtype."""


class NanInfError(ExecutionError):
    """``check_nan_inf`` found a NaN or Inf in an op's output."""


class BackwardError(GradgenError):
    """The backward pass cannot differentiate the program as asked."""


class ParamFileError(GradgenError):
    """A parameter file that cannot be read, or whose arrays do not match the program's vars."""


class DistributedError(GradgenError):
    """A data-parallel program or run that cannot work as asked: no gradients to reduce, a missing MPI, a shard
    that does not divide."""


class ForwardError(GradgenError):
    """The forward-mode pass cannot push tangents through the program as asked."""


class FunctionError(GradgenError):
    """A ``gradgen.framework.function`` that cannot build or run its program as called: an argument that is neither an array
    nor a hashable Python value, a result that is not made of Variables, a loss that is not a scalar, a parameter
    another call made with another dtype or shape."""
