"""Step rewrites for engines with native counted writes (nccl-cft, nvshmem on sm_100).

`codegen.plan` lowers a counted put as a copy, a group sync, then an add of the payload
bytes on the peer's counter (the emulation).  Where the engine counts by itself, the copy
and its add become one `putcounted` step (the engine adds the bytes after the data), and
waits on counters become `waitcounted` steps (the engine's own wait and acquire).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ccogen.codegen.model import Branch, Segment
from ccogen.codegen.steps import LOCAL, Step, StepKind

_BETWEEN = frozenset({StepKind.COPY, StepKind.SYNC, StepKind.SIGNAL, StepKind.COMMENT,
                      StepKind.PUTCOUNTED})


def _resolved(step: Step, text: str) -> str:
    """`text` (a step's C field) with the names of its `let` replaced by their values: a
    run-time count is the same as another's only if both compute the same expression."""
    for name, value in step.let:
        if text == name:
            return value
    return text


def fuse_counted(steps: tuple[Step, ...], counters: frozenset[int]) -> tuple[Step, ...]:
    """Each add of `n` bytes on a counter in `counters` of peer P absorbs the nearest
    earlier copy of `n` bytes to P in the same transfer run (copies, syncs, adds); a
    run-time `n` is compared as the expression it names.  A copy from a local buffer
    keeps the emulation (a `putcounted` step names a heap source)."""
    out: list[Step | None] = list(steps)
    for i, s in enumerate(steps):
        if s.kind is not StepKind.SIGNAL or s.peer < 0 or s.off not in counters:
            continue
        j = i - 1
        while j >= 0 and (out[j] is None or out[j].kind in _BETWEEN):  # type: ignore[union-attr]
            c = out[j]  # None: an add fused already (it stood between)
            if c is not None and c.kind is StepKind.COPY and c.dst_peer == s.peer \
                    and _resolved(c, c.c_nbytes) == _resolved(s, s.c_value) \
                    and c.src_peer == LOCAL:
                out[j] = replace(c, kind=StepKind.PUTCOUNTED, off=s.off, value=s.value)
                out[i] = None
                break
            j -= 1
    return tuple(s for s in out if s is not None)


def counted_waits(steps: tuple[Step, ...], which: Callable[[Step], bool]) -> tuple[Step, ...]:
    """`wait` steps selected by `which` become `waitcounted`."""
    return tuple(replace(s, kind=StepKind.WAITCOUNTED) if s.kind is StepKind.WAIT and which(s)
                 else s for s in steps)


def map_steps(segments: list[Segment],
              rewrite: Callable[[tuple[Step, ...]], tuple[Step, ...]]) -> list[Segment]:
    """Apply `rewrite` to the steps of every segment and branch."""
    return [replace(seg, steps=rewrite(seg.steps),
                    branches=tuple(Branch(b.scope, b.index, rewrite(b.steps))
                                   for b in seg.branches))
            for seg in segments]


__all__ = ["counted_waits", "fuse_counted", "map_steps"]
