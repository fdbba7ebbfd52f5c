"""`nvshmem`: NVSHMEM ≥ 3.4 device API on one symmetric heap.

Peers NVSHMEM maps into this GPU's address space (`nvshmem_ptr`: NVLink) are reached
as on nccl-lsa: 16-byte loads and stores, signals as release reductions at system
scope, `quiet` with no instruction (templates/nvshmem/kernels.cu.j2; measured faster
than `nvshmemx_putmem_signal_nbi_block`, docs/performance.md).  Other peers go through
`nvshmemx_putmem[_signal]_nbi_{block,warp}` / `nvshmem_putmem[_signal]_nbi` by issuer
scope, gets `..._getmem_nbi_...`, signals `nvshmemx_signal_op(..., NVSHMEM_SIGNAL_ADD,
pe)`, each copy completed with `nvshmem_quiet`.  The choice is made at run time per
address.  Waits acquire-spin with `>=` on the local slot, `barrier()` is
`nvshmemx_barrier_all_block`.  Counted writes are emulated on sm_90 by adding the byte
count to the peer's counter after the data.  A copy followed by one signal to the same
peer is fused into one put-with-signal step (on a group of several CTAs, split by
codegen.ctasplit: each CTA puts its slice with its share of the signal).  Small puts
take the LL path (codegen.ll; one 16-byte store, or two 8-byte `nvshmem_uint64_p`).

Counted writes on sm_100 (`Options.arch` sm_100 or later): a counted put becomes one
`putcounted` step, `nvshmemx_putmem_signal_counted_nbi_block` (CTA-collective; each CTA
of a group puts its 16-byte-aligned slice and the counter sums the slices), and a wait
on a counter `nvshmemx_signal_counted_wait_until`.  The payload is loaded by TMA and
delivered by the fabric proxy, so the put is preceded by `fence.proxy.async.global`
(this kernel's generic stores to a global source) and followed by a fabric -> generic
release fence, and every wait on a signal slot by the matching acquire
(`fabacquire`): a receiver that waits on a signal sent after a counted put, rather
than on the counter, still sees its bytes; every CTA of such a kernel donates
`NVSHMEMX_SMEM_MINIMUM` bytes of dynamic shared memory (`nvshmemx_give_smem` /
`nvshmemx_release_smem`; the manifest's `shared_mem`).  The generated file takes that
path only where the headers support it: NVSHMEM >= 3.8 compiled with
`NVSHMEM_CFT_HANDLES_SUPPORT` defined, CUDA >= 13.3 and sm_100 (`CCOGEN_COUNTED_NATIVE`);
elsewhere the same steps compile to the `NVSHMEM_SIGNAL_ADD` emulation.  A counted
write the library refuses (not `NVSHMEMX_SUCCESS`) traps with the status in the debug
record (kind 5): counted writes never fall back at run time.
"""

from __future__ import annotations

from dataclasses import replace

from ccogen.codegen.backends.base import Options
from ccogen.codegen.backends.counted import counted_waits, fuse_counted, map_steps
from ccogen.codegen.backends.sm import SmBackend
from ccogen.codegen.fences import add_proxy_fences
from ccogen.codegen.files import GeneratedFiles
from ccogen.codegen.layout import HeapLayout
from ccogen.codegen.ll import LLPlan
from ccogen.codegen.model import Branch, KernelModel, ProtocolModel, Segment
from ccogen.codegen.plan import Unsupported
from ccogen.codegen.steps import LOCAL, Step, StepKind
from ccogen.ir.instance import Instance
from ccogen.ir.nodes import TeamKind
from ccogen.ir.opkind import OpKind

COUNTED_ARCH = 100  # sm_100: CFT, the hardware path of counted writes
DONATED_SMEM = 32768  # NVSHMEMX_SMEM_MINIMUM: the payload comes from global memory
NATIVE_BLOCK_DIM = 256  # sm_100: NVSHMEM's put takes ~139 registers, so at most 256 threads
TRANSFERS = frozenset({StepKind.COPY, StepKind.PUTSIG, StepKind.CPUTSIG, StepKind.PUTCOUNTED})


def native_counted(options: Options) -> bool:
    digits = "".join(ch for ch in options.arch if ch.isdigit())
    return bool(digits) and int(digits) >= COUNTED_ARCH


FUSABLE = {(StepKind.SYNC, StepKind.SIGNAL): StepKind.PUTSIG,
           (StepKind.CTASYNC, StepKind.CSIGNAL): StepKind.CPUTSIG}
SIGNAL_WAITS = frozenset({StepKind.WAIT, StepKind.CWAIT, StepKind.LLWAIT})


def _fabric_acquires(steps: tuple[Step, ...]) -> tuple[Step, ...]:
    """sm_100: counted data comes through the fabric proxy; a generic signal after it does
    not make it visible to generic loads by itself.  The sender fences fabric -> generic
    after each counted put (templates/nvshmem), and every wait on a signal slot is
    followed by the matching acquire, so data ordered by a signal stays ordered."""
    out: list[Step] = []
    for s in steps:
        out.append(s)
        if s.kind in SIGNAL_WAITS:
            out.append(Step(StepKind.FABACQUIRE))
    return tuple(out)


def _runtime_counted(steps: tuple[Step, ...]) -> tuple[Step, ...]:
    """sm_100: a run-time counted wait (`rtwait`) goes through NVSHMEM's counted wait too."""
    return tuple(replace(s, kind=StepKind.RTWAITCOUNTED) if s.kind is StepKind.RTWAIT else s
                 for s in steps)


def fuse(steps: tuple[Step, ...], ctas: int) -> tuple[Step, ...]:
    """[copy to peer P, sync, one signal to P] -> [putsig]; split per CTA
    (codegen.ctasplit): [copy to P, ctasync, csignal to P] -> [cputsig] (each CTA puts
    its slice with the signal)."""
    out: list[Step] = []
    i = 0
    while i < len(steps):
        window = steps[i : i + 4]
        fused = FUSABLE.get((window[1].kind, window[2].kind)) if len(window) >= 3 else None
        if fused is StepKind.PUTSIG and ctas != 1:
            fused = None  # a leader's signal after the group's copies (a counter): not fusable
        if (fused is not None and window[0].kind is StepKind.COPY and window[0].dst_peer >= 0
                and window[0].src_peer == LOCAL
                and window[2].peer == window[0].dst_peer
                and (len(window) == 3
                     or window[3].kind not in (StepKind.SIGNAL, StepKind.CSIGNAL))):
            c, s = window[0], window[2]
            # a run-time count (a counted put's bytes) travels with the fused step; its
            # expression names the copy's own `rt_n` (codegen.plan)
            names = {name for name, _ in c.let}
            out.append(replace(c, kind=fused, off=s.off, value=s.value,
                               rt=c.rt + tuple((k, v) for k, v in s.rt if k == "value"),
                               let=c.let + tuple(e for e in s.let if e[0] not in names)))
            i += 3
            continue
        out.append(steps[i])
        i += 1
    return tuple(out)


class Nvshmem(SmBackend):
    name = "nvshmem"
    template = "nvshmem/kernels.cu.j2"
    kernel_params = ("heap", "epoch", "debug")
    split_ctas = True
    ll_path = True
    add_primitives = True

    def generate(self, instance: Instance, source: str, options: Options) -> GeneratedFiles:
        if instance.protocol.team.kind is TeamKind.WORLD:
            loads = next((op for ops in instance.ranks for op in ops if op.kind.traits.reduces
                          and any(s.rank != op.rank for s in op.srcs)), None)
            if loads is not None:
                raise Unsupported(
                    "a `reduce` that loads a peer's window needs `team lsa` on `nvshmem`: a "
                    "`team world` may span nodes, where `nvshmem_ptr` gives no pointer; "
                    "bring the peer's region over with a `put` or `get` first and reduce "
                    "locally, or write `team lsa` if every rank is on one node", loads.span)
        self._native = native_counted(options)
        # sm_100's counted path: NVSHMEM's put needs more than the 128 registers a
        # 512-thread CTA leaves, and its counted wait runs on the leader alone.
        self.copy_block_dim = NATIVE_BLOCK_DIM if self._native else 512  # type: ignore[misc]
        return super().generate(instance, source, options)

    def splits_ctas(self) -> bool:
        return not self._native

    def _kernel(self, instance: Instance, index: int, layout: HeapLayout, oracle: object,
                source: str, word: int, ll: LLPlan, max_ctas: int) -> KernelModel:
        kernel = super()._kernel(instance, index, layout, oracle, source, word, ll, max_ctas)
        if self._native and kernel.block_dim > NATIVE_BLOCK_DIM and any(
                s.kind in TRANSFERS and (s.dst_peer >= 0 or s.src_peer >= 0)
                for p in kernel.programs for seg in p.segments
                for s in (*seg.steps, *(t for b in seg.branches for t in b.steps))):
            raise Unsupported(
                f"kernel `{kernel.name}` has {kernel.block_dim} threads per CTA; on sm_100 "
                f"NVSHMEM's put needs more than the 128 registers a CTA of more than "
                f"{NATIVE_BLOCK_DIM} threads leaves each thread: write `threads="
                f"{NATIVE_BLOCK_DIM}` (or fewer), or generate for sm_90",
                instance.kernels[index].span)
        return kernel

    def plan_layout(self, instance: Instance, scratch: int) -> HeapLayout:
        layout = super().plan_layout(instance, scratch)
        self._counters = frozenset(c.offset for c in layout.counters)
        # counters fed by emulated adds (a counted put from a local buffer stays a copy and
        # a generic atomic add): ordinary stores write them, per receiving rank
        offsets = {c.name: c.offset for c in layout.counters}
        buffers = {name for name, _ in instance.buffer_sizes}
        generic: dict[int, set[int]] = {}
        for ops in instance.ranks:
            for op in ops:
                if (op.kind is OpKind.PUT and op.counter is not None and op.peer is not None
                        and op.src is not None and op.src.window in buffers):
                    generic.setdefault(op.peer, set()).add(offsets[op.counter])
        self._generic_words = {r: frozenset(w) for r, w in generic.items()}
        return layout

    def model(self, instance: Instance, source: str,
              options: Options) -> tuple[ProtocolModel, HeapLayout]:
        model, layout = super().model(instance, source, options)
        if not self._native:
            return model, layout
        donate = [k.symbol for k in model.kernels
                  if any(s.kind is StepKind.PUTCOUNTED for p in k.programs for seg in p.segments
                         for s in seg.steps)]
        return replace(model, extra={"counted_native": True, "donate": donate,
                                     "smem": DONATED_SMEM}), layout

    def manifest(self, model: ProtocolModel, layout: HeapLayout, instance: Instance,
                 options: Options) -> dict[str, object]:
        out = super().manifest(model, layout, instance, options)
        if self._native:
            donate = model.extra["donate"]
            assert isinstance(donate, list)
            for k in out["kernels"]:  # type: ignore[attr-defined]
                k["shared_mem"] = DONATED_SMEM if k["symbol"] in donate else 0
            out["nvshmem"] = {"counted": "native (NVSHMEM >= 3.8 with CFT handles, sm_100); "
                                         "else NVSHMEM_SIGNAL_ADD emulation",
                              "env": {"NVSHMEM_TMA_POLICY": "ENABLE"}, "heap_align": 256}
        return out

    def counted(self, segments: list[Segment]) -> list[Segment]:
        """sm_100: counted puts and counter waits go through the counted API; waits on
        signal slots acquire what the fabric proxy delivered (`fabacquire`)."""
        generic = self._generic_words.get(self.refining_rank, frozenset())
        out = map_steps(segments, lambda steps: add_proxy_fences("nvshmem", _fabric_acquires(
            _runtime_counted(counted_waits(fuse_counted(steps, self._counters),
                                           lambda s: s.wait_kind == 2))), generic, False))
        if any(s.kind is StepKind.PUTCOUNTED for seg in out for br in seg.branches
               for s in br.steps):
            raise Unsupported("`nvshmemx_putmem_signal_counted_nbi_block` is CTA-collective: "
                              "issue counted puts at block level on sm_100", None)
        return out

    def refine(self, segments: list[Segment], ctas: int) -> list[Segment]:
        if self._native:
            segments = self.counted(segments)
        return [replace(seg, steps=fuse(seg.steps, ctas),
                        branches=tuple(Branch(b.scope, b.index, fuse(b.steps, 1))
                                       for b in seg.branches))
                for seg in segments]
