"""The errors of the ONNX tools, under the project's ``GradgenError``."""
from __future__ import annotations

from gradgen.program.errors import GradgenError

__all__ = ["OnnxError", "OnnxExportError", "OnnxImportError", "OnnxUnavailableError"]


class OnnxError(GradgenError):
    """Something the ONNX tools refuse to do."""


class OnnxExportError(OnnxError):
    """A program that cannot become an ONNX model; the message lists every op or var at fault."""


class OnnxImportError(OnnxError):
    """An ONNX model that cannot become a gradgen program; the message lists every node at fault."""


class OnnxUnavailableError(OnnxError):
    """The optional ``onnx`` / ``onnxruntime`` packages are not installed (``pip install gradgen[onnx]``)."""


class NotImportable(Exception):
    """Raised by an import function for a node it cannot translate; the importer wraps the reason into an
    ``OnnxImportError`` naming the node."""
