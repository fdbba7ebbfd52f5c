"""`nccl-cft`: NCCL >= 2.31 device API, Compute Fabric Transport (CUDA >= 13.3, sm_100).

Shares the per-rank block plans of the SM targets (`sm.SmBackend`, `codegen.plan`); the
primitives the template prints are CFT ones:

- A put is staged: the CTA (or warp) copies a chunk of the source into a 16-byte-aligned
  shared-memory buffer, `ncclMemFence(release, Generic -> Fabric, Cta)`, then
  `cft.put` (`cft.putCounted` for a counted put: the engine adds the bytes to the peer's
  counter after the data) to the peer's logical endpoint from `ncclGetCftLeInfo`,
  `cft.submit`, `cft.flushSmem` before the buffer is refilled, and `cft.flush` once the
  op is done (so `quiet` needs nothing more), and before the bytes submitted since the
  last flush would pass `MAX_IN_FLIGHT` (16 MB: one `ncclCftSmem` tracks no more).  A get
  is the mirror image (`cft.get`,
  `submit`, `flush`, then generic stores out of shared memory).  The CTAs of a logical
  block split large transfers in 16-byte-aligned slices, each counting its own bytes.
- A remote signal is a *fenced flag update*: after the data's `cft.flush` and
  `ncclMemFence(release, Fabric -> Generic, Sys)`, a 16-byte `cft.red` with
  `ncclCftOpSum<uint64_t>` adds {value, 0} to the peer's signal slot.  When the protocol
  has `get`s, the signal is also preceded by `ncclMemFence(release, Generic -> Fabric,
  Sys)`: a peer's `get` reads my window through the fabric proxy, and what I wrote there
  with generic stores (a `copy`, a `get`'s unstaging) must be visible to it once it saw
  my signal.
- Every `cft.flush` takes the fabric report of the operations it waits for (`fabric.try_*`
  report through their mbarrier): a failed one traps with the report in the debug record
  (kind 6), never a silent hang.  Slots are 16 bytes
  apart (`CftLayout`), so each red is 16-byte aligned and the upper word is padding.
- Waits (`wait_signal`, `wait_count`) are `cft.waitCounted` at CTA scope (relaxed spin,
  wrap-safe `>=`, `ncclMemFence(acquire, Fabric -> Generic, Sys)`), acquire spins plus
  the same fence at warp and thread scope.
- `barrier()`: every CTA of the rank meets, then CTA 0 syncs the rank's one
  `ncclCftBarrierSession<ncclCoopCta>{coop, dc, 0}` with its peers
  (`reqs.cftBarrierCount` = 1: the rank-wide syncs around it already order every CTA's
  work, so a session per CTA only multiplied the fabric round trips), then the rank
  meets again.
- Window: the heap is registered `NCCL_WIN_COLL_SYMMETRIC`, plus `NCCL_WIN_CFT_COUNTED`
  when the protocol has counted puts.  A counted registration yields counted-only
  logical endpoints, so then EVERY fabric write is counted: plain puts and signal reds
  count into a per-rank sink word nobody waits on; gets are refused.

Transfers at thread scope (lanes whose op sequences differ) are refused: staging needs a
CTA or a warp.

Language v2: a `reduce` of local operands (windows of this rank, local buffers) runs on the
SMs as on nccl-lsa (the shared device header's `ccogen_reduce_*`); a peer's source is E042
from the capability table (CFT gives the SMs no pointer into a peer's window).  `signal`
is the fenced flag update of a signalled put, without data.  Local buffers are kernel
parameters `buffer:NAME` (staged puts read from them, local copies and gets write them).

Run-time values (language v2 §3, §4): `load`s of this rank's own elements, fabric
transfers of run-time bounds in whole 16-byte granules, a length of 0 issuing no CFT op,
`wait_count(expected=<run-time>)` through `cft.waitCounted`; what is refused and why is
decided in `nccl_cft_runtime` (docs/targets.md, "Run-time values").
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ccogen.codegen.backends.base import Options
from ccogen.codegen.backends.counted import counted_waits, fuse_counted, map_steps
from ccogen.codegen.backends.nccl_cft_runtime import check_runtime, runtime_counted
from ccogen.codegen.backends.sm import SmBackend
from ccogen.codegen.fences import add_proxy_fences
from ccogen.codegen.files import GeneratedFiles
from ccogen.codegen.layout import ALIGN, HeapLayout, Placed, plan_heap
from ccogen.codegen.model import ProtocolModel, Segment
from ccogen.codegen.plan import Unsupported
from ccogen.codegen.steps import Step, StepKind
from ccogen.ir.instance import Instance
from ccogen.ir.opkind import OpKind
from ccogen.targets.nccl_cft import CAPABILITIES as CAPS

SLOT_STRIDE = 16  # one 16-byte `red` per signal slot
STAGE_BYTES = 32 << 10  # the CTA's shared-memory staging buffer
# put/red bytes one `ncclCftSmem` may have in flight between flushes: its mbarrier counts
# 16-byte units (`txCount += bytes / 16`, `mbarrier.expect_tx`), at most 2^20 - 1 of them
# (16 MB, NCCL's documented limit)
MAX_IN_FLIGHT = ((1 << 20) - 1) * 16
MIN_ARCH = 100
NO_COUNTER = (1 << 64) - 1


def _round_up(value: int, align: int) -> int:
    return -(-value // align) * align


@dataclass(frozen=True, slots=True)
class CftLayout(HeapLayout):
    """`plan_heap`'s windows; 16-byte signal slots; 256-byte counters; a sink word."""

    sink: int = 0

    def slot(self, src: int, queue: int) -> int:
        return self.signals.offset + SLOT_STRIDE * (src * self.queues + queue)


def cft_layout(instance: Instance, scratch_words: int) -> CftLayout:
    base = plan_heap(instance, scratch_words)
    end = max((w.offset + w.size for w in base.windows), default=0)
    offset = _round_up(end, ALIGN)
    signals = Placed("<signals>", offset, SLOT_STRIDE * instance.nranks * instance.queues)
    offset = _round_up(offset + signals.size, CAPS.counted_alignment.counter)
    counters = []
    for c in base.counters:
        counters.append(Placed(c.name, offset, 8))
        offset += CAPS.counter_stride
    sink, offset = offset, offset + CAPS.counter_stride
    scratch = Placed("<scratch>", offset, base.scratch.size)
    size = _round_up(offset + scratch.size, 4096)
    return CftLayout(base.windows, signals, tuple(counters), scratch, size, instance.queues,
                     base.buffers, sink=sink)


def effective_arch(options: Options) -> str:
    """CFT exists from sm_100 on: a lower (or the default sm_90) arch means sm_100."""
    digits = "".join(ch for ch in options.arch if ch.isdigit())
    return options.arch if digits and int(digits) >= MIN_ARCH else "sm_100"


class NcclCft(SmBackend):
    rotates = False  # `launch % K`: not generated here yet (codegen.rotate)
    name = "nccl-cft"
    template = "nccl_cft/kernels.cu.j2"
    kernel_params = ("devcomm", "window", "epoch", "debug")
    peer_loads = False  # `require` checks read the rank's own elements only (codegen.require)

    def generate(self, instance: Instance, source: str, options: Options) -> GeneratedFiles:
        if options.epoch_from_heap:
            raise Unsupported("Options.epoch_from_heap is implemented for nccl-lsa and nvshmem "
                              "only", None)
        if instance.period > 1:
            raise Unsupported("`launch % K` is not generated on `nccl-cft` yet: generate for "
                              "`nccl-lsa` or `nvshmem`", None)
        check_runtime(instance)
        self._counted = any(op.counter is not None and op.kind is OpKind.PUT
                            for ops in instance.ranks for op in ops)
        self._getters = frozenset(op.rank for ops in instance.ranks for op in ops
                                  if op.kind is OpKind.GET)
        self._queues = instance.queues
        if self._counted and any(op.kind is OpKind.GET for ops in instance.ranks for op in ops):
            first = next(op for ops in instance.ranks for op in ops if op.kind is OpKind.GET)
            raise Unsupported("`get` in a protocol with counted puts: the heap is then a "
                              "counted window, whose logical endpoints take counted writes "
                              "only", first.span)
        return super().generate(instance, source, replace(options, arch=effective_arch(options)))

    def plan_layout(self, instance: Instance, scratch: int) -> HeapLayout:
        self._layout = cft_layout(instance, scratch)
        return self._layout

    def model(self, instance: Instance, source: str,
              options: Options) -> tuple[ProtocolModel, HeapLayout]:
        model, layout = super().model(instance, source, options)
        extra: dict[str, object] = {
            "stage_bytes": STAGE_BYTES, "counted_heap": self._counted,
            "max_in_flight": MAX_IN_FLIGHT,
            "sink": self._layout.sink if self._counted else NO_COUNTER,
            "nranks": instance.nranks,
            # a peer's `get` reads my window through the fabric proxy: what I wrote there
            # with generic stores is released to it before each signal
            "peers_read": any(op.kind is OpKind.GET for ops in instance.ranks for op in ops)}
        return replace(model, extra=extra), layout

    def refine(self, segments: list[Segment], ctas: int) -> list[Segment]:
        counters = frozenset(c.offset for c in self._layout.counters)
        rank = self.refining_rank
        # words written by ordinary stores: my local signal slots (a generic release add)
        generic = frozenset(self._layout.slot(rank, q) for q in range(self._queues))
        out = map_steps(segments, lambda steps: add_proxy_fences(
            "nccl-cft", runtime_counted(counted_waits(fuse_counted(steps, counters),
                                                      lambda s: True)),
            generic, rank in self._getters))
        for seg in out:
            for br in seg.branches:
                if br.scope == "thread" and any(_remote(s) for s in br.steps):
                    raise Unsupported("a transfer by one lane alone (lanes whose op sequences "
                                      "differ) cannot be staged on `nccl-cft`: give every lane "
                                      "the same op sequence", None)
        return out

    def requirements(self, model: ProtocolModel) -> dict[str, object]:
        barriers = any(k.rank_syncs for k in model.kernels)
        flags = ["NCCL_WIN_COLL_SYMMETRIC"] + (["NCCL_WIN_CFT_COUNTED"] if self._counted else [])
        return {"nccl": {"lsa_barrier_count": 0, "cft_caps": ["NCCL_CFT"],
                         "cft_barrier_count": 1 if barriers else 0, "window_flags": flags,
                         "min_version": "2.31.0", "min_cuda": "13.3"}}

    def manifest(self, model: ProtocolModel, layout: HeapLayout, instance: Instance,
                 options: Options) -> dict[str, object]:
        out = super().manifest(model, layout, instance, options)
        out["signals"] = {"offset": layout.signals.offset, "count": instance.nranks * model.queues,
                          "stride": SLOT_STRIDE}
        return out


def _remote(step: Step) -> bool:
    return step.kind in (StepKind.COPY, StepKind.PUTCOUNTED) and (step.dst_peer >= 0
                                                                   or step.src_peer >= 0)


__all__ = ["CftLayout", "NcclCft", "cft_layout", "effective_arch"]
