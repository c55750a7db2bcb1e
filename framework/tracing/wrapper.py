"""``function``: a Python function of layers, called with numpy arrays, run as a cached gradgen program.

    step = function(train_step, optimizer=optimizer.SGD(0.1))
    loss = step(xs, ys)                    # builds, initializes and runs the program on the first call

What ``tf.function`` and ``paddle.jit.to_static`` are to their frameworks, without a new language: the function
body is the ordinary builder code that would go inside ``program_guard``, and ``step.program`` is the ordinary
program it builds, printable, savable and explainable.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from gradgen.program import Program

from ..errors import FunctionError
from ..runtime.executor import Executor
from ..runtime.scope import Scope
from .build import Trace, trace
from .outputs import rebuild
from .signature import Signature, bind, signature_of
from .state import check_agrees, initialize

__all__ = ["Function", "function"]


class Function:
    """A Python function of layers and the programs built from it, one per call signature, sharing one scope.

    Calling it with numpy arrays (and any hashable Python values) returns numpy arrays, in the structure in which
    the function returned its Variables. ``scope`` holds the parameters and optimizer state between calls; ``programs``
    maps each ``Signature`` to its main program; ``program`` and ``startup_program`` are those of the last call.
    """

    def __init__(self, fn: Callable, optimizer: Any = None, backend: str | Executor | None = None,
                 exact_shapes: bool = False, scope: Scope | None = None):
        if not callable(fn):
            raise FunctionError(f"gradgen.framework.function wraps a Python function, got {type(fn).__name__} {fn!r:.60}")
        functools.update_wrapper(self, fn)
        self.fn = fn
        self._where = f"gradgen.framework.function {getattr(fn, '__qualname__', repr(fn))}"
        self.optimizer = optimizer
        self.exact_shapes = exact_shapes
        self.executor = (backend if isinstance(backend, Executor) else
                         Executor() if backend is None else Executor(backend=backend))
        self.scope = Scope() if scope is None else scope
        self._traces: dict[Signature, Trace] = {}
        self._made_by: dict[str, Signature] = {}
        self._last: Signature | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        traced, feed = self._traced(args, kwargs)
        values = self.executor.run(traced.main, feed=feed, fetch_list=traced.fetches, scope=self.scope)
        return rebuild(traced.template, values)

    def build(self, *args: Any, **kwargs: Any) -> Program:
        """Build (or find) the program for these arguments and initialize the scope, without running it: to read
        the program, or set parameters in ``scope``, before the first step (``jax.jit(f).lower``'s place)."""
        return self._traced(args, kwargs)[0].main

    def _traced(self, args: tuple, kwargs: dict) -> tuple[Trace, dict]:
        """The trace of this call's signature, built on first sight, and the call's feed."""
        bound = bind(self.fn, args, kwargs, self._where)
        signature, feed = signature_of(self._where, bound, self.exact_shapes)
        traced = self._traces.get(signature) or self._build(bound, signature)
        self._last = signature
        return traced, feed

    def _build(self, bound, signature: Signature) -> Trace:
        """Trace ``signature``'s programs, initialize what they add to the scope, and cache them."""
        traced = trace(self.fn, bound, signature, self.optimizer, self._where)
        check_agrees(self.scope, traced.startup, self._made_by, signature, self._where)
        for name in initialize(self.scope, traced.startup, self.executor):
            self._made_by[name] = signature
        self._traces[signature] = traced
        return traced

    # -- what it built ------------------------------------------------------------
    @property
    def programs(self) -> dict[Signature, Program]:
        """The main program of every signature called so far, in the order they were built."""
        return {signature: traced.main for signature, traced in self._traces.items()}

    def _latest(self) -> Trace:
        if self._last is None:
            raise FunctionError(f"{self._where} has built no program yet: it builds one on its first call")
        return self._traces[self._last]

    @property
    def program(self) -> Program:
        """The main program of the last call's signature: forward, and with an optimizer backward and updates."""
        return self._latest().main

    @property
    def startup_program(self) -> Program:
        """The startup program of the last call's signature (already run into ``scope``)."""
        return self._latest().startup

    @property
    def signature(self) -> Signature | None:
        """The last call's signature, or None before the first call."""
        return self._last

    def __repr__(self) -> str:
        return f"<{self._where}: {len(self._traces)} program(s)>"


def function(fn: Callable | None = None, *, optimizer: Any = None, backend: str | Executor | None = None,
             exact_shapes: bool = False, scope: Scope | None = None) -> Any:
    """Run a Python function of ``layers`` as a gradgen program: ``function(fn)``, ``@function`` or
    ``@function(optimizer=...)``.

    On the first call with a new signature it builds a fresh ``Program`` pair: one ``layers.data`` var per array
    argument, named after the parameter, of the array's dtype, with the first dim -1 (any batch size) and the
    others exact (``exact_shapes=True`` declares every dim, so each shape gets its own program); then it calls
    ``fn`` on those vars inside ``program_guard`` and fetches what ``fn`` returns: a Variable, or tuples, lists and
    dicts of them. With ``optimizer`` (a gradgen optimizer), the first returned value must be a float scalar, the
    loss, and ``optimizer.minimize(loss)`` adds the backward and update ops. The startup program runs into the
    function's own ``scope``, initializing only what it does not hold yet, so parameters persist across calls
    and across signatures.

    Arguments that are not arrays (ints, floats, strings, None, tuples of them) are static, as ``jax.jit``'s
    static arguments are: ``fn`` gets them as Python values, and each new value builds (once) a new program.
    A signature is (argument names, dtypes, ranks, every dim but the first) plus the static values.

    ``backend`` is an engine's name (``Executor(backend=...)``) or an ``Executor``; by default ``Executor()``.
    ``scope`` shares another function's parameters: ``predict = function(model, scope=train_step.scope)`` reads
    what ``train_step`` trains, since both name the parameters they build alike when they build the same layers.

        >>> @function(optimizer=optimizer.SGD(0.01))
        ... def step(x, y):
        ...     return layers.reduce_mean(layers.square(layers.fc(x, 1) - y))
        >>> loss = step(xs, ys)            # a 0-d numpy array; step.program is what ran
    """
    def wrap(f: Callable) -> Function:
        return Function(f, optimizer=optimizer, backend=backend, exact_shapes=exact_shapes, scope=scope)

    return wrap if fn is None else wrap(fn)
