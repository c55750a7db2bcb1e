"""The BLAS lookup: a provider wherever numpy's wheel bundles OpenBLAS or MKL is installed; numpy's matmul elsewhere."""
from __future__ import annotations

import glob
import os

import numpy as np

from gradgen.framework.backend.numpy import blas


def test_a_provider_is_bound_exactly_when_numpy_bundles_its_openblas_or_mkl_is_installed():
    libs = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    bundled = glob.glob(os.path.join(libs, "libscipy_openblas64_*.so"))
    assert (blas.PROVIDER is not None) == bool(bundled or blas._mkl_path()), (bundled, blas.PROVIDER)
