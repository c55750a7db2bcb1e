"""gradgen's language: the program IR, op schemas, and the Python builder.

    from gradgen.program import Program, program_guard, layers
"""
from __future__ import annotations

from . import initializer, layers
from .block import Block
from .errors import GradgenError, OpError, ProgramError, SerializationError, VerificationError
from .guard import default_main_program, default_startup_program, program_guard
from .layers.operators import install_operators
from .operator import Operator
from .ops import OP_SCHEMAS
from .program import Program
from .schema import Attr, OpSchema, Slot, TensorType
from .variable import Variable

# The one place the IR's plain-data Variable gets the builder's operators (``a + b``, ``a @ w``, ``-a``):
# design_docs/ir.md, "Where the operator sugar lives".
install_operators(Variable)


def __getattr__(name: str):
    # ``verify`` walks networkx graphs: loaded on first use, so importing the IR (and ``gradgen --help``) stays light.
    # Its module is ``verifier``, not ``verify``: importing a submodule sets the package attribute of its name, which
    # would shadow the function.
    if name == "verify":
        from .verifier import verify

        globals()["verify"] = verify
        return verify
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Program", "Block", "Operator", "Variable", "program_guard", "default_main_program", "default_startup_program",
    "layers", "initializer", "verify", "OP_SCHEMAS", "OpSchema", "Slot", "Attr", "TensorType",
    "GradgenError", "ProgramError", "OpError", "SerializationError", "VerificationError",
]
