"""The hosts: one per rank, its caller between two of its launches.

Rank r's host step runs once every issuer of r has ended the launch: it reports
aggregate ops never rung, reads the rank's outputs (the postconditions' regions of
it, recorded for the race detector and, with memory, kept for evaluation), writes
the rank's inputs and local buffers and starts the rank's next launch.  It waits
for no other rank (unless the protocol declares `between_launches: host_sync`, where
every rank's next launch waits for every rank's step) and not for the engines:
transfers in flight carry over.  A postcondition is evaluated once every side of it
is known (the outputs read by their ranks' hosts, the inputs written before the
launch), comparing the bytes and searching the initial image for where wrong bytes
came from.  The functions act on a `Machine` (`ccogen.sim.engine`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ccogen.ir import values
from ccogen.ir.instance import CheckInst, LoadInst, RegionInst
from ccogen.ir.nodes import ReduceOp
from ccogen.ir.postcondition import check_regions
from ccogen.sim import explain, queues, rounding
from ccogen.sim.race import Who
from ccogen.sim.record import RecordKind, StepRecord
from ccogen.sim.state import Image, fill, first_value, sub

if TYPE_CHECKING:
    from ccogen.sim.engine import Machine

ORIGIN_PROBE = 8  # wrong bytes needed in a row to search for where they came from


def host_step(m: Machine, rank: int) -> StepRecord:
    """Rank `rank`'s caller between two of its launches (see the module docstring)."""
    st, hb, plan = m.state, m.hb, m.plan
    proc = plan.host_of(rank)
    ranks = range(plan.instance.nranks) if plan.host_sync else (rank,)
    joins = [hb.vc[p] for r in ranks for p in plan.rank_issuers[r]]
    joined = np.maximum(hb.vc[proc], _join(m, "issuers", joins)) if joins else hb.vc[proc]
    epoch = st.epochs[rank]
    hb.host[(rank, epoch)] = hb.tick(proc, joined)
    queues.report_unrung(m, [x for x in queues.unrung(m) if x.epoch == epoch
                             and x.spec.op.rank == rank], "")
    _read_outputs(m, rank, epoch, proc)
    st.epochs[rank] += 1
    if st.epochs[rank] < m.epochs:
        _next_launch(m, rank, proc)
    st.over = all(e >= m.epochs for e in st.epochs)
    _evaluate_ready(m, rank)
    if not st.in_flight() and len(set(st.epochs)) == 1:
        m.races.prune(_hosts_clock(m, st.epochs[0] - 1))
    m.touch_rank(rank)
    if plan.host_sync:
        m.touched.update(range(plan.nissuers))
    return StepRecord(proc, RecordKind.HOST, epoch, complete=True, rank=rank)


def _hosts_clock(m: Machine, epoch: int) -> np.ndarray:
    """What every rank's caller knew at the end of launch `epoch`."""
    clocks = [m.hb.host[(r, epoch)] for r in range(m.plan.instance.nranks)]
    return np.minimum.reduce(clocks)


def launch_start(m: Machine, rank: int, epoch: int) -> np.ndarray | None:
    """What the first ops of `rank`'s launch `epoch` know: its caller's step before it
    (every caller's with `host_sync`)."""
    if epoch == 0:
        return None
    if not m.plan.host_sync:
        return m.hb.host.get((rank, epoch - 1))
    clocks = [m.hb.host[(r, epoch - 1)] for r in range(m.plan.instance.nranks)]
    return _join(m, "hosts", clocks)


def _join(m: Machine, what: str, clocks: list[np.ndarray]) -> np.ndarray:
    """`np.maximum.reduce(clocks)`, remembered for the same clock objects: with
    `host_sync` every host joins every issuer's clock, and every first op every host's,
    and no issuer steps between them (O(ranks²) clocks per launch otherwise).  A clock
    is never changed in place (`HB.tick` and `HB.absorb` make new ones), and the memo
    holds the clocks it was made of, so an identical list means identical values."""
    last = m.join_memo.get(what)
    if last is not None and len(last[0]) == len(clocks) and \
            all(a is b for a, b in zip(last[0], clocks, strict=True)):
        return last[1]
    joined = np.maximum.reduce(clocks)
    m.join_memo[what] = (clocks, joined)
    return joined


def _next_launch(m: Machine, rank: int, proc: int) -> None:
    st, plan = m.state, m.plan
    for p in plan.rank_issuers[rank]:
        st.pcs[p] = 0
        st.phase[p] = 0
    st.done[rank] = bytearray(len(plan.instance.ranks[rank]))
    st.finished[rank] = sum(1 for p in plan.rank_issuers[rank] if not plan.issuers[p].ops)
    check = _init_check(m)
    epoch = st.epochs[rank]
    _refill_buffers(m, rank, proc)
    sizes = dict(plan.windows)
    for r, window in sorted(plan.init_windows):
        if r == rank:
            region = RegionInst(window, 0, sizes[window], rank)
            m.access(region, Who("input", rank, -1, epoch, region, check=check), proc)
    if m.memory is not None:
        mine = frozenset(k for k in plan.init_windows if k[0] == rank)
        m.init_snap.setdefault(epoch, {}).update(m.memory.snapshot(mine))
    if m.rounds is not None:  # this launch's inputs, as `init(...)` names them: unrounded
        for key in plan.init_windows | {(rank, name) for name in plan.buffers}:
            if key[0] == rank:
                m.rounds.clear(key)


def _refill_buffers(m: Machine, rank: int, proc: int) -> None:
    """The caller writes every local buffer of its rank before a launch (new inputs;
    outputs are overwritten too): a write by its host, racing with whatever still
    reads them.  Fresh bytes every launch, as `ccogen run` draws them, so that bytes of
    another launch differ from this one's.  The run-time values of a concrete instance
    (`Plan.runtime_inputs`: counts, routing tables; and the windows of them the caller
    writes, `Plan.runtime_windows`) are the launch's drawn contents (`Plan.
    launch_inputs`), which its instance follows (`Plan.at`); without them, the initial
    image's come again."""
    epoch, plan = m.state.epochs[rank], m.plan
    sizes = dict(plan.windows)
    for name in sorted(plan.buffers):
        region = RegionInst(name, 0, sizes[name], rank)
        m.access(region, Who("caller", rank, -1, epoch, region), proc)
        if m.memory is not None:
            rng = np.random.default_rng([epoch, rank, _seed_of(m, rank, name)])
            key = (rank, name)
            array = m.memory.arrays[key]
            given = _inputs_of(m, epoch, key) if name in plan.runtime_inputs else None
            for _, where in m.memory.layout.chunks(key, sizes[name]):
                array[where] = given[where] if given is not None else \
                    fill(rng, plan, name, where.stop - where.start)
    if m.memory is None or not plan.launch_inputs:
        return
    for key in sorted(k for k in plan.runtime_windows if k[0] == rank):  # the write: "input"
        given = _inputs_of(m, epoch, key)
        if given is not None:
            m.memory.arrays[key][:] = given


def _inputs_of(m: Machine, epoch: int, key: tuple[int, str]) -> np.ndarray | None:
    """The run-time input `key` the caller writes before launch `epoch`."""
    inputs = m.plan.launch_inputs
    if inputs:
        return inputs[min(epoch, len(inputs) - 1)].get(key)
    return None if m.image is None else m.image[key]


def _seed_of(m: Machine, rank: int, name: str) -> int:
    """A number that follows the data seed (the first bytes of the initial image)."""
    if m.image is None:
        return 0
    return int.from_bytes(m.image[(rank, name)][:8].tobytes(), "little")


def _init_check(m: Machine) -> int:
    return next((i for i, c in enumerate(m.plan.instance.checks)
                 if any(init for _, init in check_regions(c))), -1)


def _read_outputs(m: Machine, rank: int, epoch: int, proc: int) -> None:
    """The caller reads every region of `rank` a postcondition reads, as it is now."""
    checks = m.plan.at(epoch).checks  # (`launch % K`, drawn contents)
    for index in _checks_of(m, epoch).get(rank, ()):
        check = checks[index]
        for side, (region, init) in enumerate(check_regions(check)):
            if init or region.rank != rank:
                continue
            m.access(region, Who("ensure", rank, -1, epoch, region, check=index), proc)
            if m.memory is not None:
                m.outputs[(epoch, index, side)] = m.memory.view(region).copy()
            if m.rounds is not None and side == 0:
                m.output_rounds[(epoch, index)] = m.rounds.view(region).copy()
        if check.rank == rank:  # the elements it reads as run-time values (`got[p]`)
            for x in check.loads:
                if not x.init:
                    m.access(x.region, Who("ensure", rank, -1, epoch, x.region, check=index),
                             proc)
                    _stale(m, check, x, epoch)


def _stale(m: Machine, check: CheckInst, x: LoadInst, epoch: int) -> None:
    """An element `ensure` reads as a run-time value that holds another value than the
    launch's inputs define (another launch's count, or one that has not arrived)."""
    if m.memory is None or x.value is None:
        return
    dtype = m.plan.instance.dtype(x.region.window)
    read = first_value(m.memory.view(x.region), dtype)
    if read != x.value:
        m.report(explain.stale_ensure_load(check, x, read, epoch, m.epochs))


def _side(m: Machine, epoch: int, index: int, side: int) -> np.ndarray | None:
    """Side `side` of postcondition `index` in launch `epoch` (None: not known yet)."""
    assert m.memory is not None
    region, init = check_regions(m.plan.at(epoch).checks[index])[side]
    if not init:
        return m.outputs.get((epoch, index, side))
    snap = m.init_snap.get(epoch, {})
    if (region.rank, region.window) not in snap:
        return None  # that rank's caller has not started this launch yet
    return m.memory.view_in(snap, region)


def _checks_of(m: Machine, epoch: int) -> dict[int, tuple[int, ...]]:
    """Rank -> the postconditions of launch `epoch` with a side on it or reading run-time
    values there (`check.rank`), in order: what its caller reads, and the checks a side
    of which only its caller's step can make known.  Computed once per launch's instance
    (shared by clones: it follows from the plan alone)."""
    instance = m.plan.at(epoch)
    found = m.checks_by_rank.get(id(instance))
    if found is None:
        by_rank: dict[int, list[int]] = {}
        for index, check in enumerate(instance.checks):
            ranks = {region.rank for region, _ in check_regions(check)} | {check.rank}
            for r in sorted(ranks):
                by_rank.setdefault(r, []).append(index)
        found = {r: tuple(indices) for r, indices in by_rank.items()}
        m.checks_by_rank[id(instance)] = found
    return found


def _evaluate_ready(m: Machine, rank: int) -> None:
    """Evaluate every postcondition of a launch once every side of it is known; once all
    of a launch's are, compare the bits of ranks checking the same float reduction.

    Called after rank `rank`'s caller stepped: a side becomes known only by its rank's
    caller (reading an output, or snapshotting the inputs of the next launch), so of the
    checks still waiting only those with a side on `rank` are looked at again."""
    if m.memory is None:
        return
    checks = m.plan.instance.checks
    for epoch in range(min(max(m.state.epochs), m.epochs - 1) + 1):
        if (epoch, -1) in m.evaluated:
            continue
        left: list[int] = []  # the checks of the launch still waiting for a side, in order
        waiting = m.pending.get(epoch)
        if waiting is not None:
            mine = frozenset(_checks_of(m, epoch).get(rank, ()))
        for index in range(len(checks)) if waiting is None else waiting:
            if waiting is not None and index not in mine:
                left.append(index)
                continue
            sides: list[np.ndarray | None] = []
            for i in range(len(check_regions(checks[index]))):
                side = _side(m, epoch, index, i)
                if side is None:
                    break
                sides.append(side)
            else:
                m.evaluated[(epoch, index)] = _evaluate(m, index, epoch, sides)
                continue
            left.append(index)
        m.pending[epoch] = left
        if not left:
            m.evaluated[(epoch, -1)] = True
            failed = {i for i in range(len(checks)) if not m.evaluated[(epoch, i)]}
            _same_bits_across_ranks(m, epoch, failed)


def _evaluate(m: Machine, index: int, epoch: int, sides: list[np.ndarray | None]) -> bool:
    """Check postcondition `index`; report it and return False when it fails."""
    check = m.plan.at(epoch).checks[index]
    left = sides[0]
    assert left is not None
    if check.reduction is not None:
        r = check.reduction
        terms = [t for t in sides[len(sides) - len(r.terms):] if t is not None]
        return _evaluate_reduction(m, index, epoch, left, terms)
    right = sides[1]
    assert right is not None
    equal = np.array_equal(left, right)
    if equal == (check.op == "=="):
        return True
    origin = _origin(m, check.left, left, right) if check.op == "==" and \
        not check.left_init else ""
    m.report(explain.postcondition(check, index, left, right, origin, epoch, m.epochs))
    return False


def _evaluate_reduction(m: Machine, index: int, epoch: int, left: np.ndarray,
                        terms: list[np.ndarray]) -> bool:
    check = m.plan.at(epoch).checks[index]
    r = check.reduction
    assert r is not None
    ok = values.compare(left, r.op, terms, r.weights, r.dtype)
    codes = m.output_rounds.get((epoch, index))
    if codes is not None and r.dtype.is_float and r.op is ReduceOp.SUM and check.op == "==":
        codes = rounding.per_element(codes, r.dtype.size)
        ok = ok & rounding.allowed(codes, r.dtype)
    if bool(ok.all()) == (check.op == "=="):
        return True
    expected = values.combine(r.op, terms, r.weights, r.dtype)
    m.report(explain.reduction_postcondition(check, index, left, expected, ok, epoch,
                                             m.epochs, terms, codes))
    return False


def _same_bits_across_ranks(m: Machine, epoch: int, failed: set[int]) -> None:
    """Ranks that check the same float reduction must hold the same bits (each sums in
    the order of its `reduce` sources: different orders differ in the last bits)."""
    checks = m.plan.at(epoch).checks
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
        bits = m.outputs[(epoch, indices[0], 0)]
        for other in indices[1:]:
            theirs = m.outputs[(epoch, other, 0)]
            if not np.array_equal(bits, theirs):
                m.report(explain.rank_bits(first, checks[other], bits, theirs, epoch,
                                           m.epochs))
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
