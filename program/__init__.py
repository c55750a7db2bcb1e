"""gradgen's language: the program IR, op schemas, and the Python builder.

    from program import Program, program_guard, layers
"""
from __future__ import annotations

from . import initializer, layers
from .block import Block
from .errors import GradgenError, OpError, ProgramError, SerializationError, VerificationError
from .guard import default_main_program, default_startup_program, program_guard
from .operator import Operator
from .ops import OP_SCHEMAS
from .program import Program
from .schema import Attr, OpSchema, Slot, TensorType
from .variable import Variable
from .verify import verify

__all__ = [
    "Program", "Block", "Operator", "Variable", "program_guard", "default_main_program", "default_startup_program",
    "layers", "initializer", "verify", "OP_SCHEMAS", "OpSchema", "Slot", "Attr", "TensorType",
    "GradgenError", "ProgramError", "OpError", "SerializationError", "VerificationError",
]
