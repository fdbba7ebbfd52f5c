"""The debug record (docs/runtime-abi.md): a 64-byte host-mapped struct that a debug build's
timed-out wait fills before trapping, and the report the runtime makes of it."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

RECORD_SIZE = 64
_FORMAT = struct.Struct("<IiiiiiQQQ16x")  # hit rank line src queue kind expected observed epoch
assert _FORMAT.size == RECORD_SIZE

KIND_WAIT_SIGNAL, KIND_WAIT_COUNT, KIND_BARRIER, KIND_REQUIRE = 1, 2, 3, 4
KIND_COUNTED_REFUSED = 5  # nvshmem: the counted put returned `observed` (not NVSHMEMX_SUCCESS)
KIND_FABRIC_REPORT = 6  # nccl-cft: a fabric.try_* op reported failure (`observed`: the report)
KIND_PEER_LOAD = 7  # a `reduce` source on a peer the engine gives no pointer to (nvshmem)
KIND_QUIET = 8  # mori-sdma --debug: a quiet whose queue never drained (`expected`: the target)


@dataclass(frozen=True)
class DebugRecord:
    hit: int
    rank: int
    line: int
    src: int
    queue: int
    kind: int
    expected: int
    observed: int
    epoch: int

    @classmethod
    def parse(cls, data: bytes) -> DebugRecord:
        return cls(*_FORMAT.unpack(data[:RECORD_SIZE]))

    def pack(self) -> bytes:
        return _FORMAT.pack(self.hit, self.rank, self.line, self.src, self.queue, self.kind,
                            self.expected, self.observed, self.epoch)


def describe_wait(record: DebugRecord, source: str, counters: Sequence[str] = ()) -> str:
    """`rank R: wait at file.cco:LINE for (src S, queue Q) expected E, observed O`, or the
    failure a transfer reported."""
    where = f"{source}:{record.line}" if record.line > 0 else source
    if record.kind == KIND_COUNTED_REFUSED:
        return (f"rank {record.rank}: a counted put to rank {record.src} of {record.expected} "
                f"bytes was refused by NVSHMEM (status {record.observed}; counted writes never "
                f"fall back) (epoch {record.epoch})")
    if record.kind == KIND_FABRIC_REPORT:
        return (f"rank {record.rank}: a fabric operation toward rank {record.src} failed "
                f"(CFT report {record.observed:#x}) (epoch {record.epoch})")
    if record.kind == KIND_REQUIRE:  # language v2: a `require` checked on the device
        value = record.observed - (1 << 64) if record.observed >= 1 << 63 else record.observed
        element = f"element {record.src}" if record.src >= 0 else "a value"
        return (f"rank {record.rank}: require at {where} does not hold: {element} is {value} "
                f"(epoch {record.epoch})")
    if record.kind == KIND_PEER_LOAD:
        return (f"rank {record.rank}: reduce at {where} reads rank {record.src}, which this "
                f"GPU cannot load from (nvshmem_ptr gave no pointer: another node?); move the "
                f"data into a local window with a put or get first (epoch {record.epoch})")
    if record.kind == KIND_WAIT_COUNT:
        if 0 <= record.queue < len(counters):  # queue = the counter's index in the manifest
            what = f"for counter `{counters[record.queue]}`"
        else:
            what = "for a counter"
    elif record.kind == KIND_BARRIER:
        what = "in a barrier"
    elif record.kind == KIND_QUIET:
        return (f"rank {record.rank}: quiet at {where} toward rank {record.src}, queue "
                f"{record.queue}: the engine read up to {record.observed} of {record.expected} "
                f"committed bytes (epoch {record.epoch})")
    else:
        what = f"for (src {record.src}, queue {record.queue})"
    return (f"rank {record.rank}: wait at {where} {what} expected {record.expected}, "
            f"observed {record.observed} (epoch {record.epoch})")


__all__ = ["KIND_BARRIER", "KIND_COUNTED_REFUSED", "KIND_FABRIC_REPORT", "KIND_PEER_LOAD",
           "KIND_QUIET", "KIND_REQUIRE", "KIND_WAIT_COUNT", "KIND_WAIT_SIGNAL", "RECORD_SIZE",
           "DebugRecord", "describe_wait"]
