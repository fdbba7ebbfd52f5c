"""The view-model the templates print: segments of steps, per-rank block programs.

The steps themselves are the device IR of `codegen.steps` (re-exported here).

Everything a template needs is computed here or in a backend module (offsets, peers,
expected values, launch sizes); templates only iterate and format.  The model holds
decisions, not C: what a field prints as is codegen.spell's (`qualifier`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ccogen.codegen.spell.cuda import qualifier
from ccogen.codegen.steps import BUFFER0, LOCAL, Reduction, Spread, Step, StepKind, buffer_peer


@dataclass(frozen=True, slots=True)
class Branch:
    """Code run by one warp (`scope == "warp"`) or one thread (`"thread"`) of the group."""

    scope: str
    index: int
    steps: tuple[Step, ...]
    # lanes `index .. index + count - 1` run `steps`, `var` their lane counted from 0 (a
    # run of branches folded into one: codegen.ranks.fold_lanes)
    count: int = 1
    var: str = "l"


@dataclass(frozen=True, slots=True)
class Segment:
    """Either steps the whole CTA group runs together (`branches` empty), or a fork."""

    steps: tuple[Step, ...] = ()
    branches: tuple[Branch, ...] = ()
    join: Step | None = None


@dataclass(frozen=True, slots=True)
class BlockProgram:
    """What logical block `block` of rank `rank` runs in one kernel."""

    rank: int
    block: int
    segments: tuple[Segment, ...]
    syncs: int  # group syncs per launch
    case: int  # rank * blocks + block: the kernel's dispatch label
    # a program folded over several ranks (codegen.ranks): every rank's label, `rank` the
    # first of them; its literals that depend on the rank are C expressions of `c.rank`
    cases: tuple[int, ...] = ()

    @property
    def labels(self) -> tuple[int, ...]:
        """The dispatch labels that run this program."""
        return self.cases or (self.case,)

    @property
    def folded(self) -> bool:
        return len(self.labels) > 1

    @property
    def function(self) -> str:
        if self.folded:
            return f"r{self.rank}x{len(self.labels)}_b{self.block}"
        return f"r{self.rank}_b{self.block}"

    @property
    def who(self) -> str:
        """Whose program this is, for the comment above it."""
        if self.folded:
            return f"{len(self.labels)} ranks (from rank {self.rank}, `c.rank` at run time)"
        return f"rank {self.rank}"

    @property
    def step_count(self) -> int:
        """Steps printed for this program (forks count their branches' steps and join)."""
        return sum(len(seg.steps) + sum(len(br.steps) for br in seg.branches)
                   + (seg.join is not None) for seg in self.segments)


@dataclass(frozen=True, slots=True)
class KernelModel:
    name: str
    symbol: str
    line: int
    threads: int  # the protocol's `threads=`
    block_dim: int  # launched threads per CTA (>= threads)
    ctas_per_block: int  # CTAs cooperating on each logical block
    blocks: int  # logical blocks
    programs: tuple[BlockProgram, ...]
    rank_syncs: int  # rank-wide syncs per launch (team barriers)
    group_scratch: int  # heap offset of the first group-barrier word
    rank_scratch: int  # heap offset of the rank-wide barrier word
    cooperative: bool
    epoch_word: int | None = None  # heap offset of the launch counter (Options.epoch_from_heap)
    # Whether the programs are inlined (`__forceinline__`: the context stays in registers)
    # or out of line (`__noinline__`: a kernel with very many steps compiles quickly;
    # backends.sm); spelled by codegen.spell.cuda.qualifier
    inline: bool = False

    @property
    def grid(self) -> int:
        return self.blocks * self.ctas_per_block

    @property
    def program_qualifier(self) -> str:
        return qualifier(self.inline)

    def ranks(self) -> list[int]:
        return sorted({p.rank for p in self.programs})

    def programs_of(self, rank: int) -> list[BlockProgram]:
        return [p for p in self.programs if p.rank == rank]


@dataclass(frozen=True, slots=True)
class ProtocolModel:
    """Everything a backend template prints for one instance."""

    name: str
    source: str
    banner: str
    nranks: int
    queues: int
    kernels: tuple[KernelModel, ...]
    heap_size: int
    debug: bool
    extra: dict[str, object] = field(default_factory=dict)
    buffers: tuple[str, ...] = ()  # local buffers, kernel parameters `buffer:NAME` in order
    epoch_from_heap: bool = False  # kernels read their epoch from a launch counter
    support_header: str = "ccogen_device.cuh"  # the shared device header kernels.cu includes
    runtime: bool = False  # run-time values: print templates/common/_runtime.j2
    spread: bool = False  # rows spread over the group (codegen.spread): print _spread.j2
    # Whether the step primitives are inlined (`CCOGEN_STEP_INLINE`): out of line where a
    # kernel's programs are (backends.sm): inlined at every step, ptxas took minutes
    inline_steps: bool = True

    @property
    def step_qualifier(self) -> str:
        return qualifier(self.inline_steps)


@dataclass(frozen=True, slots=True)
class DeviceSupport:
    """What the shared device header prints (templates/common/ccogen_device.cuh.j2).

    The header is the same text for every protocol of one variant: it depends only on
    these flags, so a change to it touches one golden per variant.
    """

    epoch_from_heap: bool = False  # `ccogen_launch_epoch` (codegen.Options.epoch_from_heap)
    # The target defines `ccogen_add` and `ccogen_llput_thread` (nccl-lsa, nvshmem): print
    # the signal and LL-put wrappers over them, and the release reduction they use.
    add_primitives: bool = False
    banner: str = ""

    @property
    def variant(self) -> str:
        flags = [name for name, on in (("add-primitives", self.add_primitives),
                                       ("epoch-from-heap", self.epoch_from_heap)) if on]
        return ", ".join(flags) or "base"


__all__ = ["BUFFER0", "LOCAL", "BlockProgram", "Branch", "DeviceSupport", "KernelModel",
           "ProtocolModel", "Reduction", "Segment", "Spread", "Step", "StepKind", "buffer_peer"]
