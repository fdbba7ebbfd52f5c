"""Shared lowering for CUDA targets whose data moves through the SMs (nccl-lsa, nvshmem).

Decides launch sizes, places the heap, plans every rank's blocks (`codegen.plan`) and
builds the `ProtocolModel` and manifest the templates and runtime read.

Launch sizes (`launch_shape`): each logical block runs on a group of CTAs.  A kernel
whose largest copy is at most 4 KiB (`SMALL_COPY`) runs one CTA per logical block with
the protocol's `threads=` rounded up to a warp: small messages need no more, and a
narrow CTA meets faster.  Larger copies get CTAs of at least 512 threads
(`COPY_BLOCK_DIM`), one per 64 KiB of the largest copy (`BYTES_PER_CTA`), at most 128
per group (`MAX_CTAS`) and at most the SM budget per kernel (`Options.max_ctas`, 32 by
default: the rest of the GPU stays free for the work communication overlaps with);
threads past `threads=` only help copy.  A kernel whose run-time rows are spread over
the group (`codegen.spread`) gets at least one CTA per `block_dim / 32` rows (one row a
warp), within the same budget.  Measured on 2 x H200 with
benchmarks/copy/copy_shape.cu: 128 CTAs of 512 threads store 16 MiB-1 GiB into the peer at
93.4-95.8 % of the copy engine (both ways), 32 CTAs at 90-92 %; 132 CTAs (uneven slices)
drop to 88 % from 256 MiB.  Each CTA copies a
contiguous 16-byte-aligned slice with 16-byte words, 8 loads in flight per thread
(templates/common/ccogen_device.cuh.j2).

Residency: kernels with more than one CTA are marked cooperative in the manifest.  Their
CTAs may wait on each other (CTA-group and rank-wide barriers, logical blocks waiting on
each other's local signals), so the runtime launches them with a cooperative launch after
checking the grid against the occupancy the device reports (docs/targets.md, "Residency").
On nccl-lsa and nvshmem the group's signals, waits and syncs are split per CTA
(`codegen.ctasplit`): only the barriers the protocol needs stay.

Each logical block's program is a device function the kernel's dispatch calls.  Up to
`INLINE_STEPS` steps in all the kernel's programs they are `__forceinline__`: the context
struct then stays in registers (as a `__noinline__` callee's reference argument it lives
in a 96-byte stack frame that every thread writes at the start; measured on 2 x H200 it
cost the generated alltoall ~0.6 us against its hand-written reference at 16 KiB-4 MiB,
docs/performance.md).  Above, `__noinline__` keeps very large instances quick to compile,
and so do the step primitives out of line (`ProtocolModel.inline_steps`, printed as
`CCOGEN_STEP_INLINE`): inlined at each of a few hundred steps, ptxas took minutes (issue
31: a 4-rank halo exchange over 2 minutes and an FP8 MoE dispatch 112 s on an H200 host,
17 s and 22 s out of line), and `ccogen run` looked stalled while it built.

`Options.epoch_from_heap` adds one 64-bit launch counter per kernel after its barrier
words (`KernelModel.epoch_word`); the kernel's first act is to take a ticket from it
(see `ccogen_launch_epoch` in templates/common/ccogen_device.cuh.j2).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import ClassVar

from ccogen._version import __version__
from ccogen.codegen.backends.base import (
    DEFAULT_MAX_CTAS,
    Backend,
    Options,
    buffers_manifest,
    check_budget,
    manifest_head,
    shown_source,
)
from ccogen.codegen.ctasplit import scale_programs, slot_scales, split_segments
from ccogen.codegen.files import GeneratedFiles, banner, options_hash, support_banner
from ccogen.codegen.jinja import render
from ccogen.codegen.layout import HeapLayout, plan_heap
from ccogen.codegen.ll import NONE, LLPlan, plan_ll
from ccogen.codegen.loops import fold_segments, sampled, shift_syncs
from ccogen.codegen.loops import step_count as loop_steps
from ccogen.codegen.model import (
    BlockProgram,
    DeviceSupport,
    KernelModel,
    ProtocolModel,
    Segment,
)
from ccogen.codegen.naming import c_identifier
from ccogen.codegen.plan import Unsupported, block_ops, lower_block
from ccogen.codegen.ranks import fold_ranks
from ccogen.codegen.require import require_steps
from ccogen.codegen.reroll import reroll_segments
from ccogen.codegen.rotate import merge
from ccogen.codegen.spread import SpreadPlan, plan_fork, spread_ctas, spread_reduce_rows
from ccogen.codegen.spread import apply as spread_apply
from ccogen.codegen.steps import Step, StepKind
from ccogen.ir.instance import Instance, OpInst

SMALL_COPY = 4 << 10
COPY_BLOCK_DIM = 512
BYTES_PER_CTA = 64 << 10
MAX_CTAS = 128  # per group of one logical block: the measured best into an NVLink peer
INLINE_STEPS = 256
SUPPORT_TEMPLATE = "common/ccogen_device.cuh.j2"


def expected_oracle(instance: Instance) -> Callable[[OpInst], tuple[int, int]]:
    """(expected in epoch 0, per-epoch total) of each wait, from the checker's matching."""
    from ccogen.analysis import analyse

    values = analyse(instance).expected

    def oracle(op: OpInst) -> tuple[int, int]:
        found = values.of_wait(op)
        if found is None:
            raise Unsupported("this wait pairs with no signal or counted write", op.span)
        return found

    return oracle


def launch_shape(largest_copy: int, threads: int, blocks: int,
                 block_dim: int = COPY_BLOCK_DIM,
                 max_ctas: int = DEFAULT_MAX_CTAS) -> tuple[int, int]:
    """(CTAs per logical block, threads per CTA) for a kernel (module docstring);
    `block_dim`: the backend's CTA size for copies; `max_ctas`: the SM budget (CTAs per
    launch, at least `blocks`: `base.check_budget`)."""
    warp_threads = -(-threads // 32) * 32
    if largest_copy <= SMALL_COPY:
        return 1, warp_threads
    ctas = -(-largest_copy // BYTES_PER_CTA)
    ctas = max(1, min(ctas, MAX_CTAS, max_ctas // max(1, blocks)))
    return ctas, max(block_dim, warp_threads)


class SmBackend(Backend):
    template: ClassVar[str]
    kernel_params: ClassVar[tuple[str, ...]]
    language = "cuda"
    split_ctas: ClassVar[bool] = False  # codegen.ctasplit on groups of several CTAs
    copy_block_dim: ClassVar[int] = COPY_BLOCK_DIM
    ll_path: ClassVar[bool] = False  # small puts with their signal folded in (codegen.ll)
    rotates: ClassVar[bool] = True  # `launch % K` regions (codegen.rotate)
    folds_loops: ClassVar[bool] = True  # sampled loops: codegen.loops
    folds_ranks: ClassVar[bool] = True  # one program of the run-time rank: codegen.ranks

    add_primitives: ClassVar[bool] = False  # defines ccogen_add / ccogen_llput_thread
    peer_loads: ClassVar[bool] = True  # kernels can load a peer's element (codegen.require)
    _require: dict[int, list[Step]] = {}  # noqa: RUF012  (set per generate: codegen.require)
    refining_rank: int = 0  # the rank whose program `refine` is rewriting

    def generate(self, instance: Instance, source: str, options: Options) -> GeneratedFiles:
        model, layout = self.printed_model(instance, source, options)
        text = render(self.template, model=model)
        manifest = self.manifest(model, layout, instance, options)
        return GeneratedFiles({"kernels.cu": text,
                               model.support_header: render(SUPPORT_TEMPLATE,
                                                            support=self.support(options)),
                               "manifest.json": json.dumps(manifest, indent=2) + "\n"})

    def printed_model(self, instance: Instance, source: str,
                      options: Options) -> tuple[ProtocolModel, HeapLayout]:
        """The model `generate` prints and writes the manifest of: `model`, merged over
        `launch % K`, its loops folded, rerolled and folded over the ranks, with the
        inline decision taken again on what is printed (`fold_ranks`)."""
        if instance.period > 1 and not self.rotates:
            raise Unsupported(f"`launch % K` is not generated on `{self.name}` yet: "
                              "generate for `nccl-lsa` or `nvshmem`", None)
        model, layout = self.model(instance, source, options)
        if instance.period > 1:  # `launch % K`: one program, offsets by the epoch
            models = [model] + [self.model(instance.at_launch(e), source, options)[0]
                                for e in range(1, instance.period)]
            model = merge(models, instance.period)  # type: ignore[assignment]
        # loops the checker sampled: folded into device loops, or expanded (codegen.loops)
        model = replace(model, kernels=tuple(
            replace(k, programs=tuple(replace(p, segments=tuple(fold_segments(
                p.segments, bool(instance.runtime)))) if sampled(p.segments) else p
                for p in k.programs)) for k in model.kernels))
        if instance.runtime:  # run-time protocols: per-token runs become loops, last
            model = replace(model, kernels=tuple(
                replace(k, programs=tuple(replace(p, segments=tuple(reroll_segments(
                    p.segments))) for p in k.programs)) for k in model.kernels))
        if self.splits_ctas():  # a last loop of `reduce` rows over every warp (codegen.spread)
            model = replace(model, kernels=tuple(
                replace(k, programs=tuple(replace(p, segments=tuple(spread_reduce_rows(
                    p.segments))) for p in k.programs)) if k.ctas_per_block > 1 else k
                for k in model.kernels))
        if self.folds_ranks:  # programs of `c.rank`, per-peer runs as loops (codegen.ranks)
            kernels = tuple(fold_ranks(k, instance.nranks, INLINE_STEPS) for k in model.kernels)
            model = replace(model, kernels=kernels,
                            inline_steps=all(k.inline for k in kernels))
        return model, layout

    def support(self, options: Options) -> DeviceSupport:
        """The variant of the shared device header this backend's kernels.cu includes."""
        return DeviceSupport(epoch_from_heap=options.epoch_from_heap,
                             add_primitives=self.add_primitives,
                             banner=support_banner(__version__))

    # ------------------------------------------------------------------ model
    def model(self, instance: Instance, source: str,
              options: Options) -> tuple[ProtocolModel, HeapLayout]:
        # Per kernel: one group-barrier word per logical block and the rank-wide word,
        # plus the launch counter under Options.epoch_from_heap.
        # Then the LL entries (codegen.ll), 16-byte aligned.
        source = shown_source(instance, source)  # escaped once, for every file (codegen.text)
        per_kernel = 2 if options.epoch_from_heap else 1
        scratch = sum(k.blocks for k in instance.kernels) + per_kernel * len(instance.kernels)
        oracle = expected_oracle(instance)
        # Windows and the scratch area's start do not depend on the scratch size: place
        # the LL entries with a first layout, then size the scratch area for them.
        layout = self.plan_layout(instance, scratch)
        ll = self._ll(instance, oracle, layout,
                      (layout.scratch.offset + 8 * scratch + 15) // 16 * 16)
        if ll.size:
            layout = self.plan_layout(instance, scratch + 1 + ll.size // 8)
        # debug builds check `require` first in the first kernel (codegen.require)
        self._require = require_steps(instance, layout, self.peer_loads) if options.debug else {}
        kernels = []
        word = layout.scratch.offset
        for k in instance.kernels:
            kernel = self._kernel(instance, k.index, layout, oracle, source, word, ll,
                                  options.max_ctas)
            word += 8 * (k.blocks + 1)
            if options.epoch_from_heap:
                kernel = replace(kernel, epoch_word=word)
                word += 8
            kernels.append(kernel)
        scales = slot_scales((k.ctas_per_block, k.programs) for k in kernels)
        kernels = [replace(k, programs=scale_programs(k.programs, k.ctas_per_block, scales))
                   for k in kernels]
        opts = options.as_dict()
        model = ProtocolModel(
            name=instance.protocol.name, source=source,
            banner=banner(source, __version__, options_hash({**opts, "target": self.name})),
            nranks=instance.nranks, queues=instance.queues, kernels=tuple(kernels),
            heap_size=layout.size, debug=options.debug,
            epoch_from_heap=options.epoch_from_heap, buffers=layout.buffers,
            runtime=bool(instance.runtime),
            spread=any(s.kind is StepKind.SPREAD for k in kernels for p in k.programs
                       for seg in p.segments for s in seg.steps),
            inline_steps=all(k.inline for k in kernels))
        return model, layout

    def _ll(self, instance: Instance, oracle: Callable[[OpInst], tuple[int, int]],
            layout: HeapLayout, base: int) -> LLPlan:
        """The streams sent as LL words (codegen.ll), entries from heap offset `base`."""
        if not self.ll_path:
            return NONE
        return plan_ll(instance, oracle, base, lambda name: layout.window(name).offset)

    def plan_layout(self, instance: Instance, scratch: int) -> HeapLayout:
        """Where windows, slots and counters live (default: `layout.plan_heap`)."""
        return plan_heap(instance, scratch)

    def _kernel(self, instance: Instance, index: int, layout: HeapLayout, oracle: object,
                source: str, word: int, ll: LLPlan, max_ctas: int) -> KernelModel:
        k = instance.kernels[index]
        blocks = k.logical_blocks
        check_budget(blocks, max_ctas, k.name, k.span)
        ops = [o for rank_ops in instance.ranks for o in rank_ops if o.kernel == index]
        ctas, block_dim = launch_shape(
            max((o.dst.size for o in ops if o.dst is not None), default=0), k.threads, blocks,
            self.copy_block_dim, max_ctas)
        # `blocks=B` with fewer logical blocks (no `blocks` statement: the top level is one
        # program all B CTAs run together): at least the author's B CTAs, within the budget.
        ctas = max(ctas, min(k.blocks // blocks, max_ctas // blocks))
        counters = frozenset(c.offset for c in layout.counters)
        lowered = []
        barriers = 0
        for rank in range(instance.nranks):
            for block, bops in sorted(block_ops(instance, index, rank).items()):
                segments, syncs = lower_block(bops, layout, oracle, source, ll,  # type: ignore[arg-type]
                                              instance)
                if sampled(segments):  # the unrolled instance's sync numbers (codegen.loops)
                    segments, syncs = shift_syncs(segments, syncs)
                checks = self._require.get(rank) if index == 0 and block == 0 else None
                if checks:
                    segments.insert(0, Segment(steps=tuple(checks)))
                segments, n = _number_barriers(segments)
                barriers = max(barriers, n)
                plans = self.spread_plans(segments, counters)
                lowered.append((rank, block, segments, syncs, plans))
        # rows spread over the group (codegen.spread): CTAs for one item per warp, within
        # the budget (the group's CTAs stay resident together: docs/targets.md)
        items = max((p.items for *_, plans in lowered for p in plans.values()), default=0)
        if items:
            ctas = max(ctas, spread_ctas(items, block_dim // 32, min(MAX_CTAS,
                                                                     max_ctas // blocks)))
        programs = []
        for rank, block, segments, syncs, plans in lowered:
            if self.splits_ctas() and ctas > 1:
                segments, syncs = split_segments(segments, counters)
                if sampled(segments):  # the numbers of the syncs it kept
                    segments, syncs = shift_syncs(segments, syncs, branches=False)
            segments = spread_apply(segments, plans)
            self.refining_rank = rank  # the rank whose program `refine` rewrites
            segments = self.refine(segments, ctas)
            programs.append(BlockProgram(rank, block, tuple(segments), syncs,
                                         rank * blocks + block))
        symbol = c_identifier(instance.protocol.name, k.name)
        inline = sum(loop_steps(p) for p in programs) <= INLINE_STEPS
        return KernelModel(
            name=k.name, symbol=symbol, line=k.span.line if k.span else 0, threads=k.threads,
            block_dim=block_dim, ctas_per_block=ctas,
            blocks=blocks, programs=tuple(programs), rank_syncs=2 * barriers,
            group_scratch=word + 8, rank_scratch=word, cooperative=ctas * blocks > 1,
            inline=inline)

    def spread_plans(self, segments: list[Segment],
                     counters: frozenset[int]) -> dict[int, SpreadPlan]:
        """The forks of one block whose rows are spread over the group (codegen.spread),
        by segment index; none where the backend does not split its groups per CTA."""
        if not self.splits_ctas():
            return {}
        plans = {i: plan_fork(seg, counters) for i, seg in enumerate(segments)}
        return {i: p for i, p in plans.items() if p is not None}

    def splits_ctas(self) -> bool:
        """Whether codegen.ctasplit runs on this backend's groups of several CTAs."""
        return self.split_ctas

    def refine(self, segments: list[Segment], ctas: int) -> list[Segment]:
        """Backend-specific rewriting of the planned steps (default: none)."""
        return segments

    # ------------------------------------------------------------------ manifest
    def manifest(self, model: ProtocolModel, layout: HeapLayout, instance: Instance,
                 options: Options) -> dict[str, object]:
        return {
            **manifest_head(self.name, instance, model.source, options.arch, options.debug,
                            layout.size, options.max_ctas),
            "windows": layout.windows_manifest(instance),
            **({"buffers": buffers_manifest(instance)} if instance.buffer_sizes else {}),
            "headers": [model.support_header],
            "signals": {"offset": layout.signals.offset, "count": layout.signals.size // 8},
            "scratch": {"offset": layout.scratch.offset, "size": layout.scratch.size},
            "counters": [{"name": c.name, "offset": c.offset} for c in layout.counters],
            "kernels": [
                {"name": k.name, "symbol": k.symbol, "grid": k.grid, "block": k.block_dim,
                 "shared_mem": 0, "cooperative": k.cooperative,
                 "params": [*self.kernel_params, *(f"buffer:{b}" for b in layout.buffers)]}
                for k in model.kernels],
            **self.requirements(model),
            **({"nvcc_flags": [f"-maxrregcount={step_registers(model)}"]}
               if not model.inline_steps else {}),
        }

    def requirements(self, model: ProtocolModel) -> dict[str, object]:
        return {}


def step_registers(model: ProtocolModel) -> int:
    """The registers every function of an out-of-line build may use: what
    `__launch_bounds__` gives the widest kernel (65536 per block).  ptxas refuses a kernel
    that calls an out-of-line function needing more than the kernel's own bound (seen at 8
    ranks: `ccogen_putsig_group` with 140 registers under a 512-thread kernel's 128), so
    `-maxrregcount` caps the callees as the bound caps the kernel."""
    return min(255, 65536 // max(k.block_dim for k in model.kernels))


def _number_barriers(segments: list[Segment]) -> tuple[list[Segment], int]:
    """Give each team barrier its sequence number within the launch."""
    n = 0
    out = []
    for seg in segments:
        steps = []
        for s in seg.steps:
            if s.kind is StepKind.BARRIER:
                n += 1
                s = replace(s, seq=n)
            steps.append(s)
        if any(s.kind is StepKind.BARRIER for br in seg.branches for s in br.steps):
            raise Unsupported("`barrier()` inside `warps` or `lanes` is not supported by this "
                              "target", None)
        out.append(replace(seg, steps=tuple(steps)))
    return out, n


