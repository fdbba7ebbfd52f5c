"""The mori-sdma lowering pass: one block's ops to call-level statements.

`lower_block(facts, ops)` is the pass: the ops one logical block of one rank runs (in
`codegen.plan.segments_of` order) become its `Part`s, each a list of `Stmt`s
(`codegen.steps`) that `codegen.spell.hip` spells; `facts` (`MoriFacts`, made once per
instance by `mori_facts`) carries what the analysis decided: expected values, per-epoch
totals, thread modes and the signals counted puts bring.  The pass decides which
`ccoSdma` call each op is, at which scope, with which peer, queue, offsets and lengths;
every piece of C text comes from `codegen.spell.hip` (`spell/c.py`: literals), but for
the decimal `int`s of peers, queues and source lines.

Who runs what (wave64 on gfx942/gfx950; the target's docs: codegen.backends.mori_sdma):
block-level ops run on every thread of the block; `warps w` ops on hardware wave w; the
lanes of one wave run in *phases* (every lane's k-th op before any lane's (k+1)-th), each
posting group ONE thread-scope call site reached by exactly the group's lanes with
per-lane arguments from a table (`StmtKind.LANES`); lanes that cannot be phased run one
by one, refused when a multi-lane group signals.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from ccogen.codegen.lower.mori_lanes import LaneLowering, phases
from ccogen.codegen.lower.mori_ops import WAVE, MoriFacts, by_issuer, hw_thread, mori_facts
from ccogen.codegen.plan import segments_of
from ccogen.codegen.spell import hip
from ccogen.codegen.steps import Stmt, StmtKind
from ccogen.codegen.unsupported import Unsupported
from ccogen.ir.instance import IssuerLevel, OpInst


@dataclass(frozen=True, slots=True)
class Branch:
    """Statements run where `guard` holds (empty: the whole block)."""

    guard: str
    stmts: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class Part:
    """A block-level statement list (one branch, no guard) or a fork joined by a sync."""

    branches: tuple[Branch, ...]
    join: bool


def lower_block(facts: MoriFacts, ops: Sequence[OpInst]) -> tuple[Part, ...]:
    """The pass: one block's ops to its parts (module doc)."""
    return tuple(_Blocks(facts).block_program(ops))


@dataclass(frozen=True, slots=True)
class _Blocks(LaneLowering):
    """A block's segments: block-level ops, and forks of waves (warps, or lanes)."""

    def block_program(self, ops: Sequence[OpInst]) -> list[Part]:
        parts: list[Part] = []
        for seg in segments_of(ops):
            if seg[0].issuer.level is IssuerLevel.BLOCK:
                parts.append(Part((Branch("", tuple(self.single(seg[0], "block"))),), False))
            else:
                parts.append(Part(self.fork(seg), True))
        return parts

    def fork(self, seg: Sequence[OpInst]) -> tuple[Branch, ...]:
        waves: dict[int, list[OpInst]] = defaultdict(list)
        for op in seg:
            waves[hw_thread(op) // WAVE].append(op)
        return tuple(self.wave(w, ops) for w, ops in sorted(waves.items()))

    def wave(self, w: int, ops: list[OpInst]) -> Branch:
        levels = {op.issuer.level for op in ops}
        if levels == {IssuerLevel.WARP}:
            stmts = [s for op in ops for s in self.single(op, "warp")]
            return Branch(hip.wave_is(w), tuple(stmts))
        if levels != {IssuerLevel.LANE}:
            raise Unsupported("a `warps` body that mixes warp-level ops with a nested `lanes` "
                              "block is not supported by `mori-sdma`", ops[0].span)
        in_phases = phases(ops)
        if in_phases is not None:
            stmts = [s for ph in in_phases for s in self.phase(ph)]
            return Branch(hip.wave_is(w), tuple(stmts))
        return Branch(hip.wave_is(w), tuple(self.one_by_one(ops)))

    def one_by_one(self, ops: list[OpInst]) -> list[Stmt]:
        out: list[Stmt] = []
        for lane_ops in sorted(by_issuer(ops).values(), key=lambda lane: hw_thread(lane[0])):
            for op in lane_ops:
                if (op.kind.traits.queued and op.lanes_in_group > 1 and not op.signal_per_copy
                        and (op.signal.local or op.signal.remote)):
                    raise Unsupported("lanes that differ in shape cannot post as one group; "
                                      "give every lane the same op sequence", op.span)
            body = [s for op in lane_ops for s in self.single(op, "thread")]
            out.append(Stmt(StmtKind.OPEN, guard=hip.thread_is(hw_thread(lane_ops[0]))))
            out.extend(body)
            out.append(Stmt(StmtKind.CLOSE))
        return out


__all__ = ["WAVE", "Branch", "MoriFacts", "Part", "hw_thread", "lower_block", "mori_facts"]
