"""Small puts with the signal folded into the data (the LL path; CUDA SM targets).

A put of a few bytes followed by its signal costs a release: the sender's stores must
be acknowledged over NVLink before the signal may land, ~1.7 us one way on 2 x H200
against ~0.65 us for a store the receiver polls (benchmarks/latency).  When a whole
signal stream can do without the counter, ccogen sends such puts as *LL words*: each
8-byte word carries 4 payload bytes and a 32-bit flag, and one 16-byte store writes
both words of a put of up to 8 bytes.  An aligned 8-byte store is single-copy atomic,
so a receiver that reads a word with the expected flag has that word's payload: there
is no ordering to wait for.  The receiver's wait polls the entries it consumes and
writes the payloads to the puts' destinations itself.

The flag of the k-th signal (1-based) of an epoch on a stream of P signals per epoch
is `k + epoch * P` modulo 2^32, compared wrap-aware (`(int32)(flag - want) >= 0`), so
entries never need resetting and a sender one epoch ahead is read as at least the
expected signal, as a counter would be.

A stream (src rank s -> dst rank d, queue q) takes this path only when all of these
hold over the instance (else it keeps the counter; nothing else changes):

- every transfer of s toward d on q that signals d is a `put` of at most 8 bytes
  (`LL_MAX`) from s's memory to d's, signal "remote", not aggregate, no counter, one
  signal per put (not merged with other lanes' signals), all from one issuer of one
  kernel (their order in that issuer's program is the entry order);
- s sends d nothing else on q (a put without a signal could otherwise be waited for
  through this stream's signal);
- every `wait_signal(s, queue=q)` of d is issued by one issuer of that kernel, waits
  for more signals than the previous one, and the last waits for all P: each wait
  writes the payloads of the entries since the previous wait, so every put lands;
- the instance has no `barrier()` or `fence` (they order puts by their completion,
  which an LL put only reaches at the receiver's wait).

The entries live in the heap's scratch area: P entries of 16 bytes per stream, on the
receiver (the same offsets on every rank).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

from ccogen.ir.instance import Instance, OpInst
from ccogen.ir.opkind import OpKind

LL_MAX = 8  # payload bytes of one LL put: two words of 4 bytes
ENTRY = 16  # bytes of one entry: two {payload, flag} words

Expected = Callable[[OpInst], tuple[int, int]]
StreamKey = tuple[int, int, int]  # (src rank, dst rank, queue)


@dataclass(frozen=True, slots=True)
class LLPut:
    """A put sent as LL words: entry `k` (1-based) of a stream of `per_epoch`."""

    entry: int  # heap offset of this put's entry (on the receiver)
    k: int
    per_epoch: int


@dataclass(frozen=True, slots=True)
class LLEntry:
    """One entry a wait consumes: poll it, then write its payload to `dst_off`."""

    entry: int
    k: int
    per_epoch: int
    dst_off: int
    nbytes: int


@dataclass(frozen=True)
class LLPlan:
    puts: dict[tuple[int, int], LLPut]  # (rank, op index) -> how the put is sent
    waits: dict[tuple[int, int], tuple[LLEntry, ...]]  # (rank, op index) -> entries
    size: int  # bytes of entries

    def put(self, op: OpInst) -> LLPut | None:
        return self.puts.get((op.rank, op.index))

    def wait(self, op: OpInst) -> tuple[LLEntry, ...] | None:
        return self.waits.get((op.rank, op.index))


NONE = LLPlan({}, {}, 0)


def plan_ll(instance: Instance, expected: Expected, base: int,
            window_offset: Callable[[str], int]) -> LLPlan:
    """The streams that take the LL path, their entries placed from heap offset `base`
    (16-byte aligned), and what each of their puts and waits does."""
    ops = [o for rank_ops in instance.ranks for o in rank_ops]
    if any(o.kind.traits.orders_memory for o in ops):
        return NONE
    senders: dict[StreamKey, list[OpInst]] = defaultdict(list)
    others: set[StreamKey] = set()
    for o in ops:
        if o.rt_peer is not None and o.queue is not None:  # it may go to any rank on its
            others.update((o.rank, d, o.queue) for d in range(instance.nranks))  # queue
            continue
        if o.kind.traits.rings and o.peer is not None and o.queue is not None:
            key = (o.rank, o.peer, o.queue)
            static = o.dst is not None and o.dst.runtime is None  # run-time: no LL
            if _ll_put(o) and static and not instance.is_buffer(o.src.window):  # type: ignore[union-attr]
                senders[key].append(o)
            else:
                others.add(key)
    waiters: dict[StreamKey, list[OpInst]] = defaultdict(list)
    for o in ops:
        if o.kind is OpKind.WAIT_SIGNAL and o.peer is not None and o.queue is not None:
            waiters[(o.peer, o.rank, o.queue)].append(o)
    puts: dict[tuple[int, int], LLPut] = {}
    waits: dict[tuple[int, int], tuple[LLEntry, ...]] = {}
    offset = base
    for key in sorted(senders):
        sent, received = senders[key], waiters.get(key, [])
        if key in others or not _one_issuer(sent) or not received or not _one_issuer(received) \
                or received[0].kernel != sent[0].kernel:
            continue
        counts = [expected(w) for w in received]
        per_epoch = len(sent)
        values = [v for v, _ in counts]
        if any(p != per_epoch for _, p in counts) or values[-1] != per_epoch \
                or any(b <= a for a, b in pairwise(values)) or values[0] < 1:
            continue
        entries = []
        for k, o in enumerate(sent, start=1):
            assert o.dst is not None
            puts[(o.rank, o.index)] = LLPut(offset + ENTRY * (k - 1), k, per_epoch)
            entries.append(LLEntry(offset + ENTRY * (k - 1), k, per_epoch,
                                   window_offset(o.dst.window) + o.dst.start, o.dst.size))
        before = 0
        for w, value in zip(received, values, strict=True):
            waits[(w.rank, w.index)] = tuple(entries[before:value])
            before = value
        offset += ENTRY * per_epoch
    return LLPlan(puts, waits, offset - base)


def _ll_put(o: OpInst) -> bool:
    return (o.kind is OpKind.PUT and o.dst is not None and o.src is not None
            and o.dst.rank == o.peer and o.src.rank == o.rank and 0 < o.dst.size <= LL_MAX
            and o.signal.remote and not o.signal.local and not o.aggregate
            and o.counter is None and (o.signal_per_copy or o.lanes_in_group == 1))


def _one_issuer(ops: list[OpInst]) -> bool:
    return len({(o.kernel, o.issuer) for o in ops}) == 1


__all__ = ["ENTRY", "LL_MAX", "NONE", "LLEntry", "LLPlan", "LLPut", "plan_ll"]
