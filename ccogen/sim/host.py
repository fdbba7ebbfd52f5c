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
from ccogen.sim import explain, queues, values
from ccogen.sim.plan import check_sides
from ccogen.sim.race import Who
from ccogen.sim.record import RecordKind, StepRecord
from ccogen.sim.state import Image, fill, sub

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
    _refill_buffers(m)
    for rank, window in sorted(plan.init_windows):
        region = RegionInst(window, 0, dict(plan.windows)[window], rank)
        m.access(region, Who("init", rank, -1, st.epoch, region, check=check), plan.host)
    if m.memory is not None:
        m.init_snap = m.memory.snapshot(plan.init_windows)


def _refill_buffers(m: Machine) -> None:
    """The caller writes every local buffer before a launch (new inputs; outputs are
    overwritten too): a write by the host, racing with whatever still reads them."""
    st, plan = m.state, m.plan
    sizes = dict(plan.windows)
    for rank in range(plan.instance.nranks):
        for name in sorted(plan.buffers):
            region = RegionInst(name, 0, sizes[name], rank)
            m.access(region, Who("caller", rank, -1, st.epoch, region), plan.host)
            if m.memory is not None:
                rng = np.random.default_rng([st.epoch, rank, _seed_of(m, rank, name)])
                key = (rank, name)
                array = m.memory.arrays[key]
                # run-time values: the instance was built for these inputs; they come again
                image = m.image if plan.instance.runtime == "concrete" else None
                for _, where in m.memory.layout.chunks(key, sizes[name]):
                    array[where] = image[key][where] if image is not None else \
                        fill(rng, plan, name, where.stop - where.start)


def _seed_of(m: Machine, rank: int, name: str) -> int:
    """A number that follows the data seed (the first bytes of the initial image)."""
    if m.image is None:
        return 0
    return int.from_bytes(m.image[(rank, name)][:8].tobytes(), "little")


def _init_check(m: Machine) -> int:
    return next((i for i, c in enumerate(m.plan.instance.checks)
                 if any(init for _, init in check_sides(c))), -1)


def _ensure(m: Machine, epoch: int) -> None:
    host = m.plan.host
    for index, check in enumerate(m.plan.instance.checks):
        for region, init in check_sides(check):
            if not init:
                who = Who("ensure", check.rank, -1, epoch, region, check=index)
                m.access(region, who, host)
    if m.memory is not None:
        failed = {index for index in range(len(m.plan.instance.checks))
                  if not _evaluate(m, index, epoch)}
        _same_bits_across_ranks(m, epoch, failed)


def _side(m: Machine, region: RegionInst, init: bool) -> np.ndarray:
    assert m.memory is not None
    if init:
        return m.memory.view_in(m.init_snap, region)
    return m.memory.view(region)


def _evaluate(m: Machine, index: int, epoch: int) -> bool:
    """Check postcondition `index`; report it and return False when it fails."""
    check = m.plan.instance.checks[index]
    left = _side(m, check.left, check.left_init)
    if check.reduction is not None:
        return _evaluate_reduction(m, index, epoch, left)
    assert check.right is not None
    right = _side(m, check.right, check.right_init)
    equal = np.array_equal(left, right)
    if equal == (check.op == "=="):
        return True
    origin = _origin(m, check.left, left, right) if check.op == "==" and \
        not check.left_init else ""
    m.report(explain.postcondition(check, index, left, right, origin, epoch, m.epochs))
    return False


def _evaluate_reduction(m: Machine, index: int, epoch: int, left: np.ndarray) -> bool:
    check = m.plan.instance.checks[index]
    r = check.reduction
    assert r is not None
    terms = [_side(m, t, init) for t, init in zip(r.terms, r.init, strict=True)]
    ok = values.compare(left, r.op, terms, r.weights, r.dtype)
    if bool(ok.all()) == (check.op == "=="):
        return True
    expected = values.combine(r.op, terms, r.weights, r.dtype)
    m.report(explain.reduction_postcondition(check, index, left, expected, ok, epoch,
                                             m.epochs))
    return False


def _same_bits_across_ranks(m: Machine, epoch: int, failed: set[int]) -> None:
    """Ranks that check the same float reduction must hold the same bits (each sums in
    the order of its `reduce` sources: different orders differ in the last bits)."""
    checks = m.plan.instance.checks
    groups: dict[tuple[object, ...], list[int]] = {}
    for index, c in enumerate(checks):
        r = c.reduction
        if r is None or c.op != "==" or not r.dtype.is_float or c.left_init or \
                index in failed:
            continue
        key = (r.op, r.terms, r.init, r.weights, r.dtype, c.left.window, c.left.start,
               c.left.stop)
        groups.setdefault(key, []).append(index)
    for indices in groups.values():
        first = checks[indices[0]]
        bits = _side(m, first.left, False)
        for other in indices[1:]:
            c = checks[other]
            theirs = _side(m, c.left, False)
            if not np.array_equal(bits, theirs):
                m.report(explain.rank_bits(first, c, bits, theirs, epoch, m.epochs))
                break


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
