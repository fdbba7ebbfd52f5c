"""Shared lowering for CUDA targets whose data moves through the SMs (nccl-lsa, nvshmem).

Decides launch sizes, places the heap, plans every rank's blocks (`codegen.plan`) and
builds the `ProtocolModel` and manifest the templates and runtime read.

Launch sizes: each logical block runs on a group of CTAs of `block_dim` threads.
`block_dim` is the protocol's `threads=` rounded up to a warp and at least 256, so
copies have enough threads in flight; threads past `threads=` only help copy.  The
group has one CTA when no copy of the kernel exceeds 64 KiB, else one CTA per
256 KiB of its largest copy, at most 16 — enough to saturate NVLink on an H200.
Kernels with more than one CTA are launched cooperatively (their CTAs wait on each
other).

`Options.epoch_from_heap` adds one 64-bit launch counter per kernel after its barrier
words (`KernelModel.epoch_word`); the kernel's first act is to take a ticket from it
(see `ccogen_launch_epoch` in templates/common/sm_device.cuh.j2).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import ClassVar

from ccogen import __version__
from ccogen.codegen.backends.base import Backend, Options, manifest_head
from ccogen.codegen.files import GeneratedFiles, banner, options_hash
from ccogen.codegen.jinja import render
from ccogen.codegen.layout import HeapLayout, plan_heap
from ccogen.codegen.model import BlockProgram, KernelModel, ProtocolModel, Segment
from ccogen.codegen.naming import c_identifier
from ccogen.codegen.plan import Unsupported, block_ops, lower_block
from ccogen.ir.instance import Instance, OpInst

MIN_BLOCK_DIM = 256
SMALL_COPY = 64 << 10
BYTES_PER_CTA = 256 << 10
MAX_CTAS = 16


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


def ctas_for(largest_copy: int) -> int:
    if largest_copy <= SMALL_COPY:
        return 1
    return max(1, min(MAX_CTAS, -(-largest_copy // BYTES_PER_CTA)))


class SmBackend(Backend):
    template: ClassVar[str]
    kernel_params: ClassVar[tuple[str, ...]]
    language = "cuda"

    def generate(self, instance: Instance, source: str, options: Options) -> GeneratedFiles:
        model, layout = self.model(instance, source, options)
        text = render(self.template, model=model)
        manifest = self.manifest(model, layout, instance, options)
        return GeneratedFiles({"kernels.cu": text,
                               "manifest.json": json.dumps(manifest, indent=2) + "\n"})

    # ------------------------------------------------------------------ model
    def model(self, instance: Instance, source: str,
              options: Options) -> tuple[ProtocolModel, HeapLayout]:
        # Per kernel: one group-barrier word per logical block and the rank-wide word,
        # plus the launch counter under Options.epoch_from_heap.
        per_kernel = 2 if options.epoch_from_heap else 1
        scratch = sum(k.blocks for k in instance.kernels) + per_kernel * len(instance.kernels)
        layout = self.plan_layout(instance, scratch)
        oracle = expected_oracle(instance)
        kernels = []
        word = layout.scratch.offset
        for k in instance.kernels:
            kernel = self._kernel(instance, k.index, layout, oracle, source, word)
            word += 8 * (k.blocks + 1)
            if options.epoch_from_heap:
                kernel = replace(kernel, epoch_word=word)
                word += 8
            kernels.append(kernel)
        opts = options.as_dict()
        model = ProtocolModel(
            name=instance.protocol.name, source=source,
            banner=banner(source, __version__, options_hash({**opts, "target": self.name})),
            nranks=instance.nranks, queues=instance.queues, kernels=tuple(kernels),
            heap_size=layout.size, debug=options.debug,
            epoch_from_heap=options.epoch_from_heap)
        return model, layout

    def plan_layout(self, instance: Instance, scratch: int) -> HeapLayout:
        """Where windows, slots and counters live (default: `layout.plan_heap`)."""
        return plan_heap(instance, scratch)

    def _kernel(self, instance: Instance, index: int, layout: HeapLayout, oracle: object,
                source: str, word: int) -> KernelModel:
        k = instance.kernels[index]
        ops = [o for rank_ops in instance.ranks for o in rank_ops if o.kernel == index]
        ctas = ctas_for(max((o.dst.size for o in ops if o.dst is not None), default=0))
        programs = []
        barriers = 0
        for rank in range(instance.nranks):
            for block, bops in sorted(block_ops(instance, index, rank).items()):
                segments, syncs = lower_block(bops, layout, oracle, source)  # type: ignore[arg-type]
                segments, n = _number_barriers(segments)
                barriers = max(barriers, n)
                segments = self.refine(segments, ctas)
                programs.append(BlockProgram(rank, block, tuple(segments), syncs,
                                             rank * k.blocks + block))
        symbol = c_identifier(instance.protocol.name, k.name)
        return KernelModel(
            name=k.name, symbol=symbol, line=k.span.line if k.span else 0, threads=k.threads,
            block_dim=max(MIN_BLOCK_DIM, -(-k.threads // 32) * 32), ctas_per_block=ctas,
            blocks=k.blocks, programs=tuple(programs), rank_syncs=2 * barriers,
            group_scratch=word + 8, rank_scratch=word, cooperative=ctas * k.blocks > 1)

    def refine(self, segments: list[Segment], ctas: int) -> list[Segment]:
        """Backend-specific rewriting of the planned steps (default: none)."""
        return segments

    # ------------------------------------------------------------------ manifest
    def manifest(self, model: ProtocolModel, layout: HeapLayout, instance: Instance,
                 options: Options) -> dict[str, object]:
        return {
            **manifest_head(self.name, instance, model.source, options.arch, options.debug,
                            layout.size),
            "windows": layout.windows_manifest(),
            "signals": {"offset": layout.signals.offset, "count": layout.signals.size // 8},
            "counters": [{"name": c.name, "offset": c.offset} for c in layout.counters],
            "kernels": [
                {"name": k.name, "symbol": k.symbol, "grid": k.grid, "block": k.block_dim,
                 "shared_mem": 0, "cooperative": k.cooperative, "params": list(self.kernel_params)}
                for k in model.kernels],
            **self.requirements(model),
        }

    def requirements(self, model: ProtocolModel) -> dict[str, object]:
        return {}


def _number_barriers(segments: list[Segment]) -> tuple[list[Segment], int]:
    """Give each team barrier its sequence number within the launch."""
    n = 0
    out = []
    for seg in segments:
        steps = []
        for s in seg.steps:
            if s.kind == "barrier":
                n += 1
                s = replace(s, seq=n)
            steps.append(s)
        if any(s.kind == "barrier" for br in seg.branches for s in br.steps):
            raise Unsupported("`barrier()` inside `warps` or `lanes` is not supported by this "
                              "target", None)
        out.append(replace(seg, steps=tuple(steps)))
    return out, n


