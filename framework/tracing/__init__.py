"""From a Python function of layers to a cached program: ``gradgen.framework.function``.

``signature`` says what one program is built for, ``build`` traces it, ``outputs`` maps what the function
returned to fetches and back, ``state`` keeps parameters in the function's scope across programs, and
``wrapper`` is the callable that ties them together. design_docs/function.md shows it beside today's form.
"""
from __future__ import annotations

from .signature import Input, Signature
from .wrapper import Function, function

__all__ = ["Function", "Input", "Signature", "function"]
