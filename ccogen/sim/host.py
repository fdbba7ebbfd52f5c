"""The host: it ends a launch when every issuer has finished it.

It reports aggregate ops never rung, evaluates `ensure` (recording its reads for the
race detector and, with memory, comparing the bytes and searching the initial image
for where wrong bytes came from), and starts the next launch.  It does not wait for
the engines: transfers in flight carry over.  The functions act on a `Machine`
(`ccogen.sim.engine`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ccogen.ir.instance import RegionInst
from ccogen.sim import explain, queues
from ccogen.sim.race import Who
from ccogen.sim.record import RecordKind, StepRecord
from ccogen.sim.state import Image, sub

if TYPE_CHECKING:
    from ccogen.sim.engine import Machine

ORIGIN_PROBE = 8  # wrong bytes needed in a row to search for where they came from


def host_step(m: Machine) -> StepRecord:
    st, hb, plan = m.state, m.hb, m.plan
    joined = hb.vc[plan.host]
    for p in range(plan.nissuers):
        joined = np.maximum(joined, hb.vc[p])
    hb.host = hb.tick(plan.host, joined)
    epoch = st.epoch
    queues.report_unrung(m, [x for x in queues.unrung(m) if x.epoch == epoch], "")
    _ensure(m, epoch)
    if not st.in_flight():
        m.races.prune(hb.host)
    st.epoch += 1
    if st.epoch < m.epochs:
        _next_launch(m)
    else:
        st.over = True
    m.touched.update(range(plan.nissuers))
    return StepRecord(plan.host, RecordKind.HOST, epoch, complete=True)


def _next_launch(m: Machine) -> None:
    st, plan = m.state, m.plan
    st.pcs = [0] * plan.nissuers
    st.phase = [0] * plan.nissuers
    st.done = [bytearray(len(ops)) for ops in plan.instance.ranks]
    st.barrier = {}
    st.finished = sum(1 for ip in plan.issuers if not ip.ops)
    check = _init_check(m)
    for rank, window in sorted(plan.init_windows):
        region = RegionInst(window, 0, dict(plan.windows)[window], rank)
        m.access(region, Who("init", rank, -1, st.epoch, region, check=check), plan.host)
    if m.memory is not None:
        m.init_snap = m.memory.snapshot(plan.init_windows)


def _init_check(m: Machine) -> int:
    return next((i for i, c in enumerate(m.plan.instance.checks)
                 if c.left_init or c.right_init), -1)


def _ensure(m: Machine, epoch: int) -> None:
    host = m.plan.host
    for index, check in enumerate(m.plan.instance.checks):
        for region, init in ((check.left, check.left_init), (check.right, check.right_init)):
            if not init:
                who = Who("ensure", check.rank, -1, epoch, region, check=index)
                m.access(region, who, host)
        if m.memory is not None:
            _evaluate(m, index, epoch)


def _side(m: Machine, region: RegionInst, init: bool) -> np.ndarray:
    assert m.memory is not None
    if init:
        return m.memory.view_in(m.init_snap, region)
    return m.memory.view(region)


def _evaluate(m: Machine, index: int, epoch: int) -> None:
    check = m.plan.instance.checks[index]
    left = _side(m, check.left, check.left_init)
    right = _side(m, check.right, check.right_init)
    equal = np.array_equal(left, right)
    if equal == (check.op == "=="):
        return
    origin = _origin(m, check.left, left, right) if check.op == "==" and \
        not check.left_init else ""
    m.report(explain.postcondition(check, index, left, right, origin, epoch, m.epochs))


def _origin(m: Machine, region: RegionInst, actual: np.ndarray, expected: np.ndarray) -> str:
    """Search the initial image for the first run of wrong bytes."""
    differ = np.flatnonzero(actual != expected)
    first = int(differ[0])
    run = first + 1
    while run < actual.size and run - first < 64 and actual[run] != expected[run]:
        run += 1
    where = sub(region, first, run)
    probe = actual[first:run].tobytes()
    if m.image is None or len(probe) < ORIGIN_PROBE:
        return ""  # too few bytes to say where they came from
    own = m.image.view(where) if isinstance(m.image, Image) else \
        m.image[(region.rank, region.window)][where.start:where.stop]
    if own.tobytes() == probe:
        return explain.origin_note(None, True, where)
    chunks = m.image.chunks() if isinstance(m.image, Image) else \
        [(k, 0, a) for k, a in sorted(m.image.items())]
    for (rank, window), offset, data in chunks:
        at = data.tobytes().find(probe)
        if at >= 0:
            return explain.origin_note(
                RegionInst(window, offset + at, offset + at + len(probe), rank), False, where)
    return explain.origin_note(None, False, where)
