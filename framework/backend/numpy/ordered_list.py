"""A list of distinct ints that takes inserts anywhere and says which of two items comes first in O(1).

``schedule`` places each update right after the latest op it depends on, so
it keeps asking "which of these is later?" of a list that grows in the
middle. Positions in a Python list would shift on every insert (quadratic
on large programs); here each item carries an integer label that increases
along the list instead. An insert takes the midpoint of its gap; when the
gap is used up, the labels of the smallest aligned label range around it
that is sparse enough are spread out evenly (the order-maintenance scheme
of Bender et al. 2002: amortized O(log n) labels moved per insert).
"""
from __future__ import annotations

HEAD = -1
"""The sentinel first item: ``insert_after(HEAD, x)`` puts ``x`` at the front."""

_LABEL_BITS = 96
_APPEND_STEP = 1 << 40
"""How far past the last label an append goes (halfway to the end of the label space would run out in 96)."""
_SPARSE = 1.5
"""A range of 2**i labels may be spread when it holds at most 2**i / _SPARSE**i items."""


class OrderedList:
    """Ints in a sequence, with ``append``, ``insert_after`` and ``label`` (larger label: later in the list).

    >>> seq = OrderedList()
    >>> seq.append(0); seq.append(1); seq.insert_after(0, 2)
    >>> list(seq), seq.label[2] < seq.label[1]
    ([0, 2, 1], True)
    """

    def __init__(self) -> None:
        self.label: dict[int, int] = {HEAD: 0}
        self._next: dict[int, int | None] = {HEAD: None}
        self._prev: dict[int, int] = {}
        self._last = HEAD

    def append(self, item: int) -> None:
        """Put ``item`` at the end."""
        self.insert_after(self._last, item)

    def insert_after(self, where: int, item: int) -> None:
        """Put ``item`` (not yet in the list) right after ``where`` (``HEAD`` or an item of the list)."""
        if self._gap_after(where) < 2:
            self._spread(where)
        after = self._next[where]
        high = self.label[where] + _APPEND_STEP if after is None else self.label[after]
        self.label[item] = (self.label[where] + min(high, self._label_or_end(after))) // 2
        self._next[where], self._next[item], self._prev[item] = item, after, where
        if after is None:
            self._last = item
        else:
            self._prev[after] = item

    def __iter__(self):
        item = self._next[HEAD]
        while item is not None:
            yield item
            item = self._next[item]

    def _label_or_end(self, item: int | None) -> int:
        return 1 << _LABEL_BITS if item is None else self.label[item]

    def _gap_after(self, item: int) -> int:
        return self._label_or_end(self._next[item]) - self.label[item]

    def _spread(self, where: int) -> None:
        """Relabel evenly the smallest aligned range around ``where`` with room for one more item."""
        for bits in range(1, _LABEL_BITS + 1):
            low = self.label[where] >> bits << bits
            high = low + (1 << bits)
            first = where
            while first != HEAD and self.label[self._prev[first]] >= low:
                first = self._prev[first]
            members = [first]
            while (after := self._next[members[-1]]) is not None and self.label[after] < high:
                members.append(after)
            count = len(members) + 1  # and the item about to come in
            if count <= (1 << bits) / _SPARSE ** bits or (bits == _LABEL_BITS and 2 * count <= 1 << bits):
                step = (1 << bits) // count
                for k, item in enumerate(members):
                    self.label[item] = low + k * step
                return
        raise OverflowError(f"OrderedList: more than 2**{_LABEL_BITS - 1} items")


__all__ = ["HEAD", "OrderedList"]
