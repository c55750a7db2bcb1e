"""``Scope``: where the values of persistable vars live between runs."""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator, Mapping

import numpy as np

from ..errors import ExecutionError


class Scope:
    """A mapping from var names to numpy arrays, optionally chained to a parent scope.

    Lookups fall back to the parent; writes go to this scope. The executor
    keeps persistable vars here; everything else lives only during one run.
    ``run_lock`` is held by ``Executor.run`` from reading the scope to
    committing to it, so runs on one scope from several threads take turns
    and no update is lost.
    """

    def __init__(self, parent: "Scope | None" = None):
        self._vars: dict[str, np.ndarray] = {}
        self.parent = parent
        self.run_lock = threading.RLock()

    def __getitem__(self, name: str) -> np.ndarray:
        scope = self
        while scope is not None:
            if name in scope._vars:
                value = scope._vars[name]
                return value if type(value) is np.ndarray else scope._backend_read(name, value)
            scope = scope.parent
        raise KeyError(name)

    def _backend_read(self, name: str, value) -> np.ndarray:
        """A compiled backend's array (``update(..., as_is=True)``) read as a numpy view of it, safe from any thread.

        A run may lend the memory of the array it is about to replace to its new value (buffer donation): from
        the call until its commit the stored array is dead, and reading it fails. That run holds this scope's
        ``run_lock`` until it commits, so a read that finds a lent array waits for the lock and reads again,
        then gets the committed value. A view once made is the reader's: the backend lends no memory a view
        still reads (runs cost nothing more; only a read that meets a lent array waits for the run).
        """
        try:
            return np.asarray(value)
        except RuntimeError:  # lent to the run under way (jax: "Array has been deleted")
            pass
        with self.run_lock:
            value = self._vars.get(name)
            if value is None:
                raise KeyError(name)
            try:
                return value if type(value) is np.ndarray else np.asarray(value)
            except RuntimeError as e:
                if getattr(value, "is_deleted", lambda: False)():
                    raise ExecutionError(f"scope value '{name}' is lost: a failed run on a compiled backend had "
                                         f"lent its memory ({e}); reload it (load_params) or run the startup "
                                         "program again") from None
                raise ExecutionError(f"scope value '{name}' cannot be read: {type(e).__name__}: {e}") from None

    def get(self, name: str, default=None):
        try:
            return self[name]
        except KeyError:
            return default

    def __contains__(self, name: object) -> bool:
        scope = self
        while scope is not None:
            if name in scope._vars:
                return True
            scope = scope.parent
        return False

    def own(self, name: str):
        """The array stored under ``name`` in this scope itself (not a parent), or None: as stored, so a compiled
        backend's own array for the values it committed."""
        return self._vars.get(name)

    def set(self, name: str, value) -> None:
        """Store ``value`` (as a numpy array) under ``name`` in this scope."""
        self._vars[name] = np.asarray(value)

    __setitem__ = set

    def update(self, values: Mapping[str, np.ndarray], *, as_is: bool = False) -> None:
        """Store every value (as a numpy array) at once, so a KeyboardInterrupt lands before or after it.

        The values are converted first; then one ``dict.update`` stores them
        all, and Python runs signal handlers only between bytecodes. ``as_is``
        stores them unconverted: a compiled backend keeps its own arrays here,
        so that its next run can reuse their memory (reads still give numpy).
        """
        arrays = dict(values) if as_is else {name: np.asarray(value) for name, value in values.items()}
        self._vars.update(arrays)

    def remove(self, name: str) -> None:
        self._vars.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        """Names stored in this scope (not its parents), in insertion order."""
        return iter(list(self._vars))

    def __len__(self) -> int:
        return len(self._vars)

    def keys(self) -> list[str]:
        return list(self._vars)

    def new_scope(self) -> "Scope":
        """A child scope whose lookups fall back to this one."""
        return Scope(self)

    def snapshot(self) -> dict[str, np.ndarray]:
        return {name: self[name] for name in self._vars}

    def __repr__(self) -> str:
        return f"Scope({len(self._vars)} vars{', with parent' if self.parent is not None else ''})"


_GLOBAL_SCOPE = Scope()


def global_scope() -> Scope:
    """The scope ``Executor.run`` uses when none is given (the one ``scope_guard`` installed, if any)."""
    return _GLOBAL_SCOPE


@contextmanager
def scope_guard(scope: Scope) -> Iterator[Scope]:
    """Inside the ``with``, ``global_scope()`` (and so every run given no scope) is ``scope``, as in Paddle.

    >>> with scope_guard(Scope()):
    ...     exe.run(startup)       # the parameters land in the new scope, not the global one
    """
    global _GLOBAL_SCOPE
    if not isinstance(scope, Scope):
        raise ExecutionError(f"scope_guard needs a Scope, got {type(scope).__name__}")
    previous, _GLOBAL_SCOPE = _GLOBAL_SCOPE, scope
    try:
        yield scope
    finally:
        _GLOBAL_SCOPE = previous
