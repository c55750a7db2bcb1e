"""Containers the IR hands out that tell their program when they change, so cached plans never go stale.

``TrackedList`` (``block.ops``, ``program.blocks``) and ``TrackedDict``
(``block.vars``; an op's ``inputs``, ``outputs`` and ``attrs``) bump
``program.version`` on every edit, whoever makes it. The lists an op holds (a
slot's var names, a list attr) are ``FrozenList`` values: an in-place edit is
refused, because a list can be shared (makers read them, a default attr list
is shared by every op that took the default) and has no way to tell its op.

A shallow ``copy.copy`` of one is a plain list or dict that belongs to no
program. ``deepcopy`` and pickling keep the kind: a deep copy of a Program is
tracked like the original, against the copy's own version.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from .errors import ProgramError

if TYPE_CHECKING:
    from .program import Program


class FrozenList(list):
    """A list an op holds: reading, comparing, ``+`` and ``list(...)`` work; in-place edits raise ProgramError."""

    __slots__ = ()

    def __copy__(self) -> list:
        return list(self)

    def __reduce_ex__(self, protocol):
        return FrozenList, (list(self),)

    def _refuse(self, *args, **kwargs):
        raise ProgramError(f"the list {list(self)!r} belongs to an op and cannot change in place; assign a new "
                           "list instead (op.attrs['axes'] = [...], op.inputs['X'] = [...], or Block.set_attr)")

    append = extend = insert = remove = pop = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse


def frozen(value: Any) -> Any:
    """``value`` as a FrozenList if it is a plain list, else unchanged."""
    return FrozenList(value) if type(value) is list else value


def _bumping(edit: Callable) -> Callable:
    """``edit`` (a list or dict method), followed by a bump of the owner's program version."""
    def tracked_edit(self, *args, **kwargs):
        result = edit(self, *args, **kwargs)
        self.program._touch()
        return result

    tracked_edit.__name__ = edit.__name__
    tracked_edit.__doc__ = f"{edit.__doc__} Bumps the program's version."
    return tracked_edit


class TrackedList(list):
    """A list of the IR (a block's ops, a program's blocks) whose edits bump ``program.version``."""

    __slots__ = ("program",)

    def __copy__(self) -> list:
        return list(self)

    def __reduce_ex__(self, protocol):
        return tracked_list, (list(self), self.program)

    append = _bumping(list.append)
    extend = _bumping(list.extend)
    insert = _bumping(list.insert)
    remove = _bumping(list.remove)
    pop = _bumping(list.pop)
    clear = _bumping(list.clear)
    sort = _bumping(list.sort)
    reverse = _bumping(list.reverse)
    __setitem__ = _bumping(list.__setitem__)
    __delitem__ = _bumping(list.__delitem__)
    __iadd__ = _bumping(list.__iadd__)
    __imul__ = _bumping(list.__imul__)


def _frozen_items(args: tuple, kwargs: dict) -> dict:
    return {k: frozen(v) for k, v in dict(*args, **kwargs).items()}


class TrackedDict(dict):
    """A dict of the IR (a block's vars, an op's slots and attrs) whose edits bump ``program.version``.

    List values are stored as FrozenLists.
    """

    __slots__ = ("program",)

    def __copy__(self) -> dict:
        return dict(self)

    def __reduce_ex__(self, protocol):
        return tracked_dict, (dict(self), self.program)

    def __setitem__(self, key, value) -> None:
        dict.__setitem__(self, key, frozen(value))
        self.program._touch()

    def update(self, *args, **kwargs) -> None:
        """Like ``dict.update``; list values become FrozenLists. Bumps the program's version."""
        dict.update(self, _frozen_items(args, kwargs))
        self.program._touch()

    def __ior__(self, other):
        self.update(other)
        return self

    def setdefault(self, key, default=None):
        """Like ``dict.setdefault``; a list default becomes a FrozenList. Bumps the program's version."""
        value = dict.setdefault(self, key, frozen(default))
        self.program._touch()
        return value

    __delitem__ = _bumping(dict.__delitem__)
    pop = _bumping(dict.pop)
    popitem = _bumping(dict.popitem)
    clear = _bumping(dict.clear)


def tracked_list(items: Iterable, program: "Program") -> TrackedList:
    """A TrackedList of ``items`` owned by ``program``."""
    tracked = TrackedList(items)
    tracked.program = program
    return tracked


def tracked_dict(items: Mapping, program: "Program") -> TrackedDict:
    """A TrackedDict of ``items`` (plain list values frozen) owned by ``program``."""
    tracked = TrackedDict(items)
    for key, value in items.items():
        if type(value) is list:
            dict.__setitem__(tracked, key, FrozenList(value))
    tracked.program = program
    return tracked


__all__ = ["FrozenList", "TrackedList", "TrackedDict", "frozen", "tracked_list", "tracked_dict"]
