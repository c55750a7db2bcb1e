"""ONNX export and import: gradgen programs to ONNX models (opset 17) and back.

    from gradgen.framework import export_onnx, import_onnx

The ``onnx`` and ``onnxruntime`` packages are an optional extra (``pip install gradgen[onnx]``):
this package's entry points load the modules that use them on first call, so gradgen imports and
runs without them, and a call without them raises ``OnnxUnavailableError``.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

from .errors import OnnxError, OnnxExportError, OnnxImportError, OnnxUnavailableError

__all__ = ["export_onnx", "import_onnx", "OnnxError", "OnnxExportError", "OnnxImportError", "OnnxUnavailableError"]


def _module(name: str):
    """``.export`` / ``.importer``, which import ``onnx`` at their top."""
    try:
        return import_module(f".{name}", __name__)
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] in ("onnx", "onnxruntime"):
            raise OnnxUnavailableError(f"the ONNX tools need the '{e.name}' package: "
                                       "pip install 'gradgen[onnx]'") from None
        raise


def export_onnx(program, path=None, **options) -> Any:
    """The ONNX model of ``program`` (see ``export.export_onnx`` for the options)."""
    return _module("export").export_onnx(program, path, **options)


def import_onnx(model, **options) -> Any:
    """``(program, params, outputs)`` from an ONNX model (see ``importer.import_onnx``)."""
    return _module("importer").import_onnx(model, **options)
