"""The project's own exception types.

Every error gradgen raises on purpose derives from ``GradgenError`` so that a
caller (and the CLI) can tell a user mistake from a bug in gradgen itself.
They live in ``program`` because it is the bottom package; ``framework`` adds
its own subclasses for run-time failures.
"""
from __future__ import annotations


class GradgenError(Exception):
    """Base class of every error gradgen raises deliberately."""


class ProgramError(GradgenError):
    """Misuse of the IR: a missing var, a bad block index, a clashing name."""


class OpError(ProgramError):
    """An op that does not match its schema: unknown type, slots, attrs or shapes."""


class SerializationError(GradgenError):
    """A program file that cannot be read: malformed JSON, unknown version, bad fields."""


class VerificationError(ProgramError):
    """A program that fails ``verify``; ``problems`` lists every problem found."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"program has {len(self.problems)} problem(s):\n{lines}")


class ShapeInferenceError(Exception):
    """Raised inside a schema's infer function; wrapped into an ``OpError`` with context."""


__all__ = ["GradgenError", "ProgramError", "OpError", "SerializationError", "VerificationError", "ShapeInferenceError"]
