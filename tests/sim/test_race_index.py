"""The race log's index of accesses (`sim.race._Spans`) finds exactly the overlapping
accesses a scan of every earlier one finds, in the order they were made."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ccogen.ir.instance import RegionInst
from ccogen.sim.race import Access, RaceLog, Who, _Spans


def _access(rng: random.Random, n: int) -> Access:
    start = rng.randrange(0, 200)
    length = rng.choice([0, 1, 1, 2, 3, 8, 16, 64, rng.randrange(0, 300)])
    role = rng.choice(["src", "dst", "copy-r", "copy-w", "count", "ensure", "input"])
    who = Who(role, 0, n, 0, RegionInst("w", start, start + length, 0))
    vc = np.array([rng.randrange(0, 5) for _ in range(3)], dtype=np.int64)
    return Access(("w", 0), start, start + length, rng.randrange(3), rng.randrange(6), vc,
                  who)  # type: ignore[arg-type]


def _scan(records: list[Access], new: Access) -> list[Access]:
    write, adds = new.who.write, new.who.role == "count"
    return [rec for rec in records
            if rec.start < new.stop and new.start < rec.stop and (write or rec.who.write)
            and not (adds and rec.who.role == "count") and rec.clock > new.vc[rec.proc]]


@pytest.mark.parametrize("seed", range(40))
def test_the_index_finds_what_a_scan_finds(seed: int) -> None:
    rng = random.Random(seed)
    log, made = RaceLog(), []
    for n in range(150):
        new = _access(rng, n)
        assert log.access(new) == _scan(made, new)
        made.append(new)
        if rng.random() < 0.02:  # a host step: what it orders goes, the index is rebuilt
            host = np.array([rng.randrange(0, 6) for _ in range(3)], dtype=np.int64)
            log.prune(host)
            made = [r for r in made if r.clock > host[r.proc]]
        if rng.random() < 0.05:
            log = log.copy()
    spans = _Spans(made)
    for start in range(0, 250, 7):
        for stop in (start, start + 1, start + 50):
            assert spans.overlapping(start, stop) == [
                r for r in made if r.start < stop and start < r.stop]
