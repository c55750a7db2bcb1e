"""Tables of the design docs generated from code: a table lives between two marker lines of its doc, a test
checks the doc holds exactly what the code makes, and ``write_table_main`` is the ``--write`` command that
refreshes it."""
from __future__ import annotations

import argparse
from typing import Callable, NamedTuple

__all__ = ["with_table_between", "write_table_main", "DocTable"]


def with_table_between(doc: str, begin: str, end: str, table: str) -> str:
    """``doc`` with the text between the marker lines ``begin`` and ``end`` replaced by ``table``."""
    start, stop = doc.find(begin), doc.find(end)
    if start < 0 or stop < start:
        raise ValueError(f"the document has no op table between the lines {begin!r} and {end!r}")
    return doc[:start + len(begin)] + "\n" + table + "\n" + doc[stop:]


def write_table_main(prog: str, description: str, update: Callable[[str], str], make: Callable[[], str],
                     argv: list[str] | None = None) -> int:
    """``prog [--write DOC]``: print the table ``make()`` builds, or refresh it in DOC with ``update(doc)``."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--write", metavar="DOC", help="replace the table between the marker lines of DOC")
    args = parser.parse_args(argv)
    if args.write is None:
        print(make())
        return 0
    with open(args.write, encoding="utf-8") as f:
        doc = f.read()
    updated = update(doc)
    if updated != doc:
        with open(args.write, "w", encoding="utf-8") as f:
            f.write(updated)
    print(f"{args.write}: op table {'updated' if updated != doc else 'already current'}")
    return 0


class DocTable(NamedTuple):
    """One generated table: its doc's marker lines, the function that makes it, and its ``--write`` command
    (``prog``, described by ``description``). ``with_table`` and ``main`` are what a table module exports."""

    begin: str
    end: str
    make: Callable[[], str]
    prog: str
    description: str

    def with_table(self, doc: str) -> str:
        """``doc`` with the text between the marker lines replaced by the current table."""
        return with_table_between(doc, self.begin, self.end, self.make())

    def main(self, argv: list[str] | None = None) -> int:
        """``prog [--write DOC]``: print the table, or refresh it in DOC."""
        return write_table_main(self.prog, self.description, self.with_table, self.make, argv)
