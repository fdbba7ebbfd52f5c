"""Two launches back to back: the instance the checker proves things about.

Protocols run in loops, often replayed in a CUDA graph with no host synchronisation
between launches (language reference section 4, `between_launches:`): a rank may
start launch N+1 while its peers are still in launch N.  `back_to_back(instance)`
returns the instance with every rank's op instances repeated for a second launch,
`OpInst.epoch` 1, indices and preds shifted by the rank's launch length, posting
groups renumbered.  The happens-before graph of it (`hb_graph.HBGraph`) adds one
`boundary` event per rank between the launches: the rank's caller reading every
output (`ensure`) and writing every input (`init(...)`) on the launch's stream, after
that rank's launch ended and before its next one starts -- and nothing else: no
other rank waits for it, unless the protocol declares `between_launches: host_sync`
(then every rank's boundary is joined before any next launch starts).

`launch_matching` gives the waits of the second launch their values: the generated
code waits for `expected + epoch * total` (slots and counters are never reset), or
`expected` for a counter the protocol resets.  A wait never returns when it expects
more than every launch of the instance sends to its key together: a wait of launch 1
expecting more than one launch sends returns on launch 2's increments (E021 reports
the value, the graph what happens).
"""

from __future__ import annotations

from dataclasses import fields, replace
from operator import attrgetter

from ccogen.analysis.matching import (
    Increment,
    Matching,
    SlotKey,
    WaitMatch,
    counted_writes,
    increments_of,
)
from ccogen.ir.instance import Instance, OpInst

LAUNCHES = 2


def launch_count(instance: Instance, launches: int = LAUNCHES) -> int:
    """How many launches show every race: with `launch % K` rotating K landing slots, a
    launch can only overtake the one K launches before it, so K + 1 are needed."""
    return max(launches, instance.period + 1) if launches > 1 else 1


def back_to_back(instance: Instance, launches: int = LAUNCHES) -> Instance:
    """`instance` launched `launches` times in a row on every rank (see the module
    docstring); more where `launch % K` rotates its regions (`launch_count`)."""
    if launches == 1 or instance.launches != 1:
        return instance
    launches = launch_count(instance, launches)
    ranks = []
    for rank, ops in enumerate(instance.ranks):
        n = len(ops)
        out: list[OpInst] = list(ops)
        for e in range(1, launches):
            these = instance.at_launch(e).ranks[rank]  # regions of launch e (`launch % K`)
            out += [_relaunched(op, e * n, e) for op in these]
        ranks.append(tuple(out))
    return replace(instance, ranks=tuple(ranks), launches=launches)


_FIELDS = tuple(f.name for f in fields(OpInst))
_VALUES = attrgetter(*_FIELDS)
_INDEX, _PREDS, _GROUP, _EPOCH = (_FIELDS.index(n) for n in ("index", "preds", "group", "epoch"))


def _relaunched(op: OpInst, shift: int, epoch: int) -> OpInst:
    """`op` in launch `epoch`: index, preds and posting group shifted by `shift` (what
    `dataclasses.replace` does, field by field, at a third of its cost)."""
    values = list(_VALUES(op))
    values[_INDEX] = op.index + shift
    values[_PREDS] = tuple(p + shift for p in op.preds)
    values[_GROUP] = op.group + shift
    values[_EPOCH] = epoch
    return OpInst(*values)


def launch_matching(instance: Instance, single: Matching) -> Matching:
    """The matching of a back-to-back `instance` from the matching of one launch."""
    if instance.launches == 1:
        return single
    if instance.period == 1:  # every launch runs the same ops: shift the first one's
        increments, signal_of = _relaunched_increments(instance, single)
    else:
        increments, signal_of = increments_of(instance)
    waits: dict[tuple[int, int], WaitMatch] = {}
    resets = single.expected.reset_counters
    for rank, ops in enumerate(instance.ranks):
        n = instance.launch_len(rank)
        for op in ops:
            w = single.waits.get((rank, op.index % n))
            if w is None:
                continue
            e = op.epoch
            reset = w.kind == "count" and w.key in resets
            expected = None if w.expected is None else (
                w.expected if reset else w.expected + e * w.total)
            # what the key can receive at all: a wait for more than one launch sends can
            # still return, on the next launch's increments (E021 says it is wrong)
            total = w.total if reset else instance.launches * w.total
            waits[(rank, op.index)] = replace(w, op=op.index, expected=expected, total=total)
    return Matching(increments=increments, counted=counted_writes(instance), waits=waits,
                    expected=single.expected, modes=single.modes, signal_of=signal_of)


def _relaunched_increments(instance: Instance, single: Matching
                           ) -> tuple[dict[SlotKey, tuple[Increment, ...]],
                                      dict[tuple[int, int, bool], Increment]]:
    """`increments_of(instance)` for a back-to-back instance whose launches are copies of
    the first (no `launch % K`): each increment of the first launch, its ops and posting
    group shifted by the sender's launch length per launch.  A slot has one sender, whose
    later launches' ops come after its first launch's: the order by first op is kept."""
    lengths = [instance.launch_len(r) for r in range(instance.nranks)]
    increments: dict[SlotKey, tuple[Increment, ...]] = {}
    signal_of: dict[tuple[int, int, bool], Increment] = {}
    for slot, incs in single.increments.items():
        out = list(incs)
        for e in range(1, instance.launches):
            for inc in incs:
                shift = e * lengths[inc.sender]
                out.append(Increment(slot=slot, sender=inc.sender,
                                     ops=tuple(i + shift for i in inc.ops), local=inc.local,
                                     per_copy=inc.per_copy, group=inc.group + shift))
        increments[slot] = tuple(out)
        for inc in out:
            for i in inc.ops:
                signal_of[(inc.sender, i, inc.local)] = inc
    return increments, signal_of


__all__ = ["LAUNCHES", "back_to_back", "launch_count", "launch_matching"]
