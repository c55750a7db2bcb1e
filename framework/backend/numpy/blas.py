"""``gemm``: C = alpha op(A) op(B) + beta C in place, through one chosen BLAS, called by ctypes.

Every sizable product gradgen runs goes through one provider (``PROVIDER``),
chosen by measurement (``design_docs/performance.md``, *Choosing the GEMM*):

- ``mkl`` when the ``mkl`` wheel is installed (``pip install gradgen[mkl]``,
  part of the test command), the CPU is Intel's and torch is not installed
  (``_torch_installed``: MKL's Intel OpenMP, loaded before torch, takes over
  torch's OpenMP calls): on a 2-core Intel AVX-512
  machine, quiet, two threads, the seed step's five products took 238 us
  (f64) and 150 us (f32) against 364 / 175 us through numpy's bundled OpenBLAS
  and 322 / 192 us through the OpenBLAS PyTensor links; it picks AVX-512
  kernels whatever ``OPENBLAS_CORETYPE`` says;
- ``numpy`` otherwise: the OpenBLAS bundled in numpy's wheel, already loaded.
  On a 2-core AMD EPYC with AVX-512, MKL runs slower kernels (it dispatches its
  best code on Intel's CPUs only): a ResNet convolution's [64, 576] x [576, 32768]
  float32 product took 57 ms through MKL and 20 ms through numpy's OpenBLAS,
  and the seed step's products were no faster (391 / 203 us against 370 / 190).

``GRADGEN_BLAS=numpy`` (read, never written) or ``use_blas("numpy")`` keeps
gradgen on numpy's pool. Choose that in a process that also runs large numpy
products of its own, or their pools fight: MKL's OpenMP threads spin for a
while after each product, and on 2 cores a numpy product made right after a
gradgen one then waits (measured: alternating 300x300 numpy products with the
seed step's two large MKL products took 1.67 ms against 0.68 ms apart).

Products of at most ``SMALL_PRODUCT`` multiply-adds never reach a pool: they
run on numpy's matmul, which OpenBLAS computes on the calling thread at that
size, more cheaply than a ctypes call that wakes MKL's threads (the seed
step's three small products: 4-6 us each against 8-10 us).

Where no provider is found (a numpy built against another BLAS), ``gemm``
falls back to numpy for every product.

Threads follow the user. threadpoolctl sees a provider loaded here like any
other BLAS, so ``threadpool_limits(n)`` limits it too; and at load, unless
MKL's own variables (``MKL_NUM_THREADS``, ``OMP_NUM_THREADS``) say otherwise,
MKL gets the thread count numpy's BLAS has (``OPENBLAS_NUM_THREADS`` or its
default). No environment variable is ever written.
"""
from __future__ import annotations

import ctypes
import glob
import importlib.metadata
import importlib.util
import os
import platform
import threading
from functools import partial
from typing import Callable, NamedTuple

import numpy as np

__all__ = ["GEMM_DTYPES", "PROVIDER", "Provider", "SMALL_PRODUCT", "gemm", "gemm_at", "numpy_openblas",
           "prepare_gemm", "provider_threads", "use_blas"]

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
GEMM_DTYPES = (np.dtype("float32"), np.dtype("float64"))
"""The dtypes every BLAS's ``?gemm`` computes (``s`` and ``d``): other products stay with numpy's matmul."""
_THREAD = threading.local()
"""``provider``: the provider whose ``per_thread`` set-up this thread has run."""

SMALL_PRODUCT = 65536 * 4
"""m*n*k at or below which OpenBLAS runs a product on the calling thread (its interface/gemm.c:
``SMP_THRESHOLD_MIN * GEMM_MULTITHREAD_THRESHOLD``): such products go to numpy's matmul."""



class Provider(NamedTuple):
    """A loaded CBLAS: its name, its ``?gemm`` functions by dtype, and its library (for thread queries)."""

    name: str
    gemm: dict
    lib: ctypes.CDLL
    path: str
    per_thread: Callable[[], None] | None = None
    """Run once in each thread before its first product through this provider (``_brief_spin``)."""
    gemm_batch: dict | None = None
    """``cblas_?gemm_batch`` by dtype (MKL's grouped interface: arrays of parameters and of matrix addresses),
    or None where the provider has none gradgen uses."""


def _declare(fns: dict, index_type) -> dict:
    for dtype, fn in fns.items():
        real = ctypes.c_double if dtype == np.float64 else ctypes.c_float
        vp = ctypes.c_void_p
        fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, index_type, index_type, index_type, real, vp,
                       index_type, vp, index_type, real, vp, index_type]
        fn.restype = None
    return fns


def _declare_batch(fns: dict) -> dict:
    """(layout, transa[], transb[], m[], n[], k[], alpha[], a*[], lda[], b*[], ldb[], beta[], c*[], ldc[],
    group_count, group_size[]): every argument but the layout and the group count is an address."""
    for fn in fns.values():
        fn.argtypes = [ctypes.c_int] + [ctypes.c_void_p] * 13 + [ctypes.c_int, ctypes.c_void_p]
        fn.restype = None
    return fns


def numpy_openblas() -> Provider | None:
    """The OpenBLAS bundled in numpy's wheel (64-bit indexes, ``scipy_`` symbol prefix), or None."""
    libs = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libs, "libscipy_openblas64_*.so"))):
        try:
            lib = ctypes.CDLL(path)
            fns = {np.dtype("float64"): lib.scipy_cblas_dgemm64_, np.dtype("float32"): lib.scipy_cblas_sgemm64_}
        except (OSError, AttributeError):
            continue
        return Provider("numpy", _declare(fns, ctypes.c_int64), lib, path)
    return None


def _mkl_path() -> str | None:
    try:
        files = importlib.metadata.files("mkl") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in files:
        if os.path.basename(str(f)).startswith("libmkl_rt.so"):
            return os.path.realpath(str(f.locate()))
    return None


def _mkl() -> Provider | None:
    """MKL's single dynamic library from the ``mkl`` wheel (32-bit indexes), or None when not installed."""
    path = _mkl_path()
    if path is None:
        return None
    try:
        lib = ctypes.CDLL(path)
        fns = {np.dtype("float64"): lib.cblas_dgemm, np.dtype("float32"): lib.cblas_sgemm}
        batch = {np.dtype("float64"): lib.cblas_dgemm_batch, np.dtype("float32"): lib.cblas_sgemm_batch}
    except (OSError, AttributeError):
        return None
    lib.MKL_Get_Max_Threads.restype = ctypes.c_int
    if not (os.environ.get("MKL_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS")):
        lib.MKL_Set_Num_Threads(ctypes.c_int(_numpy_blas_threads()))
    return Provider("mkl", _declare(fns, ctypes.c_int), lib, path, _brief_spin(os.path.dirname(path)),
                    _declare_batch(batch))


def _brief_spin(lib_dir: str) -> Callable[[], None] | None:
    """A function making the calling thread's MKL (OpenMP) team sleep 1 ms after a product instead of 200 ms.

    After a parallel region, Intel's OpenMP threads spin for ``KMP_BLOCKTIME`` (200 ms by default) before they
    sleep. On 2 cores that spinning thread takes a core from whatever runs next, in this process or another:
    a numpy 300x300 product right after 0.25 s of gradgen's products took 15 ms instead of 0.47 ms (another
    process, measured); with 1 ms it took 0.45-0.73 ms, while gradgen's products, a few microseconds apart
    within a run, stay as fast (0 ms, sleeping at once, made them 1.5x slower). ``kmp_set_blocktime`` affects
    only the calling thread's teams; a ``KMP_BLOCKTIME`` the user set is left alone (None)."""
    if os.environ.get("KMP_BLOCKTIME") is not None:
        return None
    try:
        set_blocktime = ctypes.CDLL(os.path.join(lib_dir, "libiomp5.so")).kmp_set_blocktime
    except (OSError, AttributeError):
        return None
    return lambda: set_blocktime(ctypes.c_int(1))


def _numpy_blas_threads() -> int:
    """How many threads numpy's BLAS runs with now: what the user asked of it, or its default."""
    numpy_lib = numpy_openblas()
    if numpy_lib is None:
        return os.cpu_count() or 1
    fn = numpy_lib.lib.scipy_openblas_get_num_threads64_
    fn.restype = ctypes.c_int
    return int(fn())


def provider_threads(provider: Provider) -> int:
    """The number of threads ``provider`` runs a large product with, as it stands now."""
    if provider.name == "mkl":
        return int(provider.lib.MKL_Get_Max_Threads())
    fn = provider.lib.scipy_openblas_get_num_threads64_
    fn.restype = ctypes.c_int
    return int(fn())


_LOADERS = {"numpy": numpy_openblas, "mkl": _mkl}


def _intel_cpu() -> bool:
    """True on an Intel CPU, the only kind MKL gives its fastest kernels (Linux's /proc/cpuinfo, else the
    platform's processor string)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return "GenuineIntel" in line
    except OSError:
        pass
    return "intel" in platform.processor().lower()


def _torch_installed() -> bool:
    """Whether torch is installed (not imported: asking costs no import). Then "auto" keeps MKL out of the process:
    loaded first, as gradgen's numpy engine loads it, MKL's Intel OpenMP runtime answers the OpenMP calls of a torch
    imported after it (its worker threads ran torch's parallel regions), and on a 2-core Intel Xeon the torch
    engine's anchors transformer step then took 115-150 ms against 67-82 without MKL; ``backend="auto"`` imports
    torch after its numpy runs, and then chose xla over the torch engine it had slowed."""
    return importlib.util.find_spec("torch") is not None


def _choose(name: str) -> Provider | None:
    if name == "auto":
        return (_mkl() if _intel_cpu() and not _torch_installed() else None) or numpy_openblas()
    if name not in _LOADERS:
        raise ValueError(f"GRADGEN_BLAS / use_blas: unknown BLAS '{name}' (known: auto, {', '.join(_LOADERS)})")
    return _LOADERS[name]() or (numpy_openblas() if name != "numpy" else None)


PROVIDER: Provider | None = _choose(os.environ.get("GRADGEN_BLAS") or "auto")
"""The BLAS every sizable gradgen product runs on (None: numpy's matmul does them)."""


def use_blas(name: str) -> Provider | None:
    """Run gradgen's products on BLAS ``name`` from now on: "mkl", "numpy", or "auto" (MKL when installed on an
    Intel CPU without torch, the default); numpy's when ``name`` is not installed. Returns the provider now in
    use."""
    global PROVIDER
    PROVIDER = _choose(name)
    return PROVIDER


def _operand(x: np.ndarray, trans: bool) -> tuple[np.ndarray, bool]:
    """``x`` as a C-contiguous array and whether BLAS must transpose it: a transposed view costs no copy."""
    if x.flags.c_contiguous:
        return x, trans
    if x.flags.f_contiguous:
        return x.T, not trans
    return np.ascontiguousarray(x), trans


def prepare_gemm(trans_a: bool, trans_b: bool, alpha: float, a: np.ndarray, b: np.ndarray, beta: float,
                 c: np.ndarray) -> Callable[[], np.ndarray]:
    """Everything ``gemm`` checks, converts or computes aside, done now; the returned function writes C and
    returns it. Raises ValueError for operands that do not fit, before anything is written, before anything is
    written."""
    if a.dtype != c.dtype or b.dtype != c.dtype or not c.flags.c_contiguous:
        raise ValueError(f"gemm wants operands of C's dtype {c.dtype} and a C-contiguous C")
    m, k = (a.shape[1], a.shape[0]) if trans_a else a.shape
    kb, n = (b.shape[1], b.shape[0]) if trans_b else b.shape
    if k != kb or c.shape != (m, n):
        raise ValueError(f"gemm shapes do not agree: op(A) {m}x{k}, op(B) {kb}x{n}, C {c.shape}")
    if m * n * k <= SMALL_PRODUCT or PROVIDER is None:  # also the empty cases, where BLAS wants dimensions >= 1
        product = np.matmul(a.T if trans_a else a, b.T if trans_b else b)
        if alpha != 1.0:
            product *= alpha
        return partial(_accumulate, product, beta, c)
    a, trans_a = _operand(a, trans_a)
    b, trans_b = _operand(b, trans_b)
    fn = _set_up(PROVIDER).gemm[c.dtype]

    def write() -> np.ndarray:  # holds a and b: _operand may have made them, and BLAS reads them by address
        fn(_ROW_MAJOR, _TRANS if trans_a else _NO_TRANS, _TRANS if trans_b else _NO_TRANS, m, n, k, alpha,
           a.ctypes.data, a.shape[1], b.ctypes.data, b.shape[1], beta, c.ctypes.data, n)
        return c

    return write


def _set_up(provider: Provider) -> Provider:
    """``provider``, once its per-thread set-up has run in this thread."""
    if provider.per_thread is not None and getattr(_THREAD, "provider", None) is not provider:
        provider.per_thread()
        _THREAD.provider = provider
    return provider


def _accumulate(product: np.ndarray, beta: float, c: np.ndarray) -> np.ndarray:
    if beta == 0.0:
        c[...] = product
    else:
        if beta != 1.0:
            c *= beta
        c += product
    return c


def _gemm(trans_a: bool, trans_b: bool, alpha: float, a: np.ndarray, b: np.ndarray, beta: float,
          c: np.ndarray) -> np.ndarray:
    return prepare_gemm(trans_a, trans_b, alpha, a, b, beta, c)()


gemm: Callable[..., np.ndarray] = _gemm
"""``gemm(trans_a, trans_b, alpha, a, b, beta, c)`` for 2-D float32/float64 arrays, writing C."""


def gemm_at(dtype, trans_b: bool, m: int, n: int, k: int, a: int, lda: int, b: int, ldb: int, beta: float,
            c: int, ldc: int) -> None:
    """C = A @ op(B) + beta C on the chosen BLAS (``PROVIDER``, which must be set), row-major matrices given by
    address and leading dimension: for a kernel that walks sub-matrices of arrays it holds (the taps of a
    shifted convolution, which overlap). The caller keeps the arrays alive and every matrix inside them."""
    _set_up(PROVIDER).gemm[dtype](_ROW_MAJOR, _NO_TRANS, _TRANS if trans_b else _NO_TRANS, m, n, k, 1.0, a, lda, b,
                                  ldb, beta, c, ldc)
