"""``schedule`` (linear, with latest-reader/writer indexes) gives exactly the order of the textbook scan-back."""
from __future__ import annotations

import random
from typing import NamedTuple

from gradgen.framework.backend.numpy.ordered_list import HEAD, OrderedList
from gradgen.framework.backend.numpy.schedule import schedule


class FakeOp(NamedTuple):
    role: str
    input_arg_names: list
    output_arg_names: list


def scan_back_schedule(ops) -> list[int]:
    """The reference: each update walks back from the end of the order to the first op it has a hazard with."""
    order: list[int] = []
    for i, op in enumerate(ops):
        if op.role != "optimize":
            order.append(i)
            continue
        reads, writes = set(op.input_arg_names), set(op.output_arg_names)
        at = len(order)
        while at > 0:
            other = ops[order[at - 1]]
            if any(n in reads or n in writes for n in other.output_arg_names) or any(
                    n in writes for n in other.input_arg_names):
                break
            at -= 1
        order.insert(at, i)
    return order


def _random_program(rng: random.Random) -> list[FakeOp]:
    names = [f"v{k}" for k in range(rng.randint(1, 12))]
    share = rng.random()
    return [FakeOp("optimize" if rng.random() < share else rng.choice(["forward", "backward"]),
                   rng.sample(names, rng.randint(0, min(3, len(names)))),
                   rng.sample(names, rng.randint(0, min(2, len(names)))))
            for _ in range(rng.randint(0, 60))]


def test_the_same_order_as_the_scan_back_on_random_programs():
    rng = random.Random(24)
    for _ in range(2000):
        ops = _random_program(rng)
        assert schedule(ops) == scan_back_schedule(ops), ops


def test_the_same_order_when_thousands_of_updates_land_in_one_place():
    """Every update goes to the front, then every one right after one op: the labels must be spread again."""
    front = [FakeOp("forward", [], ["a"])] + [FakeOp("optimize", [], [f"u{k}"]) for k in range(1000)]
    after_one = ([FakeOp("forward", ["x"], ["x"])] + [FakeOp("forward", [], [f"f{k}"]) for k in range(50)]
                 + [FakeOp("optimize", ["x"], [f"u{k}"]) for k in range(1000)])
    for ops in (front, after_one):
        assert schedule(ops) == scan_back_schedule(ops)


class _CountingOp:
    """An op that counts how often its names are read."""

    reads = 0

    def __init__(self, role, ins, outs):
        self.role, self._ins, self._outs = role, ins, outs

    @property
    def input_arg_names(self):
        _CountingOp.reads += 1
        return self._ins

    @property
    def output_arg_names(self):
        _CountingOp.reads += 1
        return self._outs


def test_each_op_is_looked_at_a_constant_number_of_times():
    """A training program of 20k ops with every update at the end: the scan-back looked at ~n**2 / 4 ops."""
    n = 5000
    ops = [_CountingOp("forward", [f"h{k}", f"w{k}"], [f"h{k + 1}"]) for k in range(n)]
    ops += [_CountingOp("backward", [f"h{k}", f"g{k + 1}"], [f"g{k}", f"w{k}@GRAD"]) for k in range(n - 1, -1, -1)]
    ops += [_CountingOp("optimize", [f"w{k}", f"w{k}@GRAD", "lr"], [f"w{k}"]) for k in range(n)]
    ops += [_CountingOp("optimize", ["lr"], [f"m{k}"]) for k in range(n)]
    _CountingOp.reads = 0
    order = schedule(ops)
    assert sorted(order) == list(range(len(ops)))
    assert _CountingOp.reads <= 2 * len(ops)
    at = {op: k for k, op in enumerate(order)}
    assert all(at[2 * n + k] == at[2 * n - 1 - k] + 1 for k in range(n))  # each update right after its gradient


def test_ordered_list_labels_follow_the_order():
    rng = random.Random(7)
    seq, plain = OrderedList(), []
    for item in range(4000):
        at = rng.randrange(len(plain) + 1) if rng.random() < 0.5 else 0
        where = HEAD if at == 0 else plain[at - 1]
        seq.insert_after(where, item)
        plain.insert(at, item)
    assert list(seq) == plain
    assert [seq.label[i] for i in plain] == sorted(seq.label[i] for i in plain)
