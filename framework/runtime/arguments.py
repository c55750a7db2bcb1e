"""The checks at the top of ``Executor.run``: each argument is what run expects, or an error saying so.

A Variable stands for its name only within its own Program and the programs cloned
from it (``main.clone(for_test=True)`` keeps every name): a Variable of any other
Program (a different model, or a file loaded again) is an error, never a lookup by name.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gradgen.program import Program, Variable

from ..errors import ExecutionError, FeedError
from .scope import Scope

__all__ = ["check_program", "check_scope", "feed_by_name", "fetch_names"]


def check_program(program: Any) -> Program:
    if not isinstance(program, Program):
        hint = " (load a program file with Program.load(path))" if isinstance(program, str) else ""
        raise ExecutionError(f"Executor.run: program must be a Program, got {type(program).__name__}{hint}")
    return program


def check_scope(scope: Any) -> Scope:
    if not isinstance(scope, Scope):
        raise ExecutionError(f"Executor.run: scope must be a Scope, got {type(scope).__name__}")
    return scope


def _var_name(program: Program, var: Variable, what: str) -> str:
    if var.block.program is not program and not program.descends_from(var.block.program):
        raise ExecutionError(f"Executor.run: {what} Variable '{var.name}' belongs to another Program than the one "
                             "being run, which is not a clone of it (pass the Variable of this program, or its name)")
    return var.name


def feed_by_name(program: Program, feed: Any) -> dict[str, Any]:
    """``feed`` as a dict keyed by var name; keys may be names or Variables of ``program``."""
    if feed is None:
        return {}
    if type(feed) is dict and all(type(key) is str for key in feed):  # the common case, checked fast
        return feed
    if not isinstance(feed, Mapping):
        raise FeedError(f"Executor.run: feed must be a dict of var name -> array, got {type(feed).__name__}")
    named: dict[str, Any] = {}
    for key, value in feed.items():
        if isinstance(key, Variable):
            key = _var_name(program, key, "feed")
        elif not isinstance(key, str):
            raise FeedError(f"Executor.run: feed keys must be var names (str) or Variables, got {key!r} "
                            f"({type(key).__name__})")
        if key in named:
            raise FeedError(f"Executor.run: var '{key}' is fed twice (by name and by Variable)")
        named[key] = value
    return named


def fetch_names(program: Program, fetch_list: Any) -> list[str]:
    """The names of ``fetch_list``'s items: names, or Variables of ``program``."""
    if fetch_list is None:
        return []
    if type(fetch_list) is not list and (isinstance(fetch_list, (str, bytes, Variable, Mapping))
                                         or not isinstance(fetch_list, Iterable)):
        raise ExecutionError(f"Executor.run: fetch_list must be a list of Variables or names, got "
                             f"{type(fetch_list).__name__}")
    names = []
    for item in fetch_list:
        if type(item) is str:
            names.append(item)
        elif isinstance(item, Variable):
            names.append(_var_name(program, item, "fetched"))
        elif isinstance(item, str):
            names.append(item)
        else:
            raise ExecutionError(f"Executor.run: fetch_list items must be Variables or names, got "
                                 f"{type(item).__name__}")
    return names
