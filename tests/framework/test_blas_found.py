"""The BLAS lookup: a provider wherever numpy's wheel bundles OpenBLAS or MKL is installed; numpy's matmul elsewhere."""
from __future__ import annotations

import glob
import os

import numpy as np

from gradgen.framework.backend.numpy import blas
from gradgen.framework.backend.numpy.blas import gemm
from gradgen.framework.backend.numpy.fusion import fuse_gemm_updates
from gradgen.framework.backend.numpy.plan_data import Unit
from gradgen.framework.backend.numpy.schedule import schedule
from gradgen.program import Program, layers, program_guard
from gradgen.framework import optimizer


def test_a_provider_is_bound_exactly_when_numpy_bundles_its_openblas_or_mkl_is_installed():
    libs = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    bundled = glob.glob(os.path.join(libs, "libscipy_openblas64_*.so"))
    assert (blas.PROVIDER is not None) == bool(bundled or blas._mkl_path()), (bundled, blas.PROVIDER)


def test_without_the_library_the_plan_keeps_plain_products():
    main = Program()
    with program_guard(main, Program()):
        x = layers.data("x", [-1, 4], "float64")
        w = layers.create_parameter([4, 3], "float64", name="w")
        loss = layers.reduce_sum(layers.square(x @ w))
        optimizer.SGD(0.1).minimize(loss)
    block = main.global_block()
    units = [Unit(index=i, ops=(i,), ins=tuple(block.ops[i].input_arg_names), outs=tuple(block.ops[i].output_arg_names))
             for i in schedule(block.ops)]
    assert fuse_gemm_updates(block, units, {loss.name}, blas=None) == units
    assert len(fuse_gemm_updates(block, units, {loss.name}, blas=gemm)) == len(units) - 1
