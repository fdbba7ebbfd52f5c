"""`mori-sdma`: AMD MORI CCO `ccoSdma`, the SDMA copy engines driven from a HIP kernel.

A copy-engine API: every `put`/`get` of an issuer is ONE `sdma.put<...>` / `sdma.get<...>`
call at that issuer's scope, with every template argument spelled out
(`<Coop, localSignal, remoteSignal, optFlags, threadMode>`); the engine moves the
bytes and fires the signal after the copy on the same queue.  Facts come from the
capability table `ccogen.targets.mori_sdma` and the analysis (`ccogen.analysis`):
expected values, per-epoch totals and the thread mode of every posting group.

Who runs what (wave64 on gfx942/gfx950):

- block-level ops run on every thread of the block: `ccoCoopBlock` calls (the leader
  posts, `quiet` syncs the block); `waitSignal` spins in thread 0, then the block syncs;
- `warps w`: IR warp w is hardware wave w (`threadIdx.x / 64 == w`), `ccoCoopWarp`;
- `lanes`: IR lane t is thread t (inside `warps w`: thread 64*w + (t - 32*w)).  The
  lanes of one wave run in *phases* (every lane's k-th op before any lane's
  (k+1)-th, the schedule the SM targets use too).  In a phase, each posting group is
  ONE `sdma.put<ccoCoopThread, ..., mode>` call site reached by exactly the group's
  lanes, with per-lane arguments from a `switch (threadIdx.x)` table, so MORI groups
  the lanes as the compiler counted them (one signal per group, `SameQueue` when every
  lane targets one `(peer, queue)`).  Non-blocking call sites come before blocking ones
  (lanes of a wave have no independent progress).  Lanes whose op sequences cannot be
  phased run one by one, which is refused when a multi-lane group signals.

`commit(p, queue=q)` is `sdma.commit<ccoCoopThread>(p, q)` by the issuer's leader: the
warp/block forms ring every queue toward `p`, including queues other issuers may be
filling.  `quiet(p)` / `quiet(p, queue=q)` are `quiet<Coop>(p)` / `quietQueue<Coop>(p, q)`
with the issuer's Coop; `quiet()` drains every peer.  Waits are
`sdma.waitSignal(src, q, expected + epoch * per_epoch)` followed by a system-scope
acquire fence (MORI polls with relaxed loads); `--debug` bounds them and reports the
wait in the debug record.  After a local `copy` a system release fence makes the CU
stores visible to the copy engines.

Run-time values (language v2 §3, a run-time protocol only): a `load` of my own window
reads `c.heap` where the op runs (a peer's is refused); a put/get of run-time length
computes it once and a length of 0 becomes an 8-byte copy between scratch words, so
the op still posts and signals as counted.  Counted writes (§4) are emulated: a counted
put is a `remoteSignal` put, and `wait_count` waits for every `(sender, queue)` slot its
counted puts signal, each for its static number of puts per epoch (docs/targets.md).

The backend is its passes and a spelling module: `codegen.layout.plan_heap` (the heap,
with a scratch word), the analysis, then the pass `codegen.lower.mori` for every block
of every rank (ops to statements), spelled by `codegen.spell.hip` through the templates;
this module refuses what the target lacks, sizes the launches and writes the manifest.

Files: `kernels.hip` (device code; defines `BUILD_CCO_SDMA` itself), `host.cpp` (C ABI
host entry: `ccoCommCreate`, `ccoMemAlloc`, `ccoWindowRegister`, `ccoDevCommCreate` with
`reqs.sdmaQueueCount` = the instance's queue count, and a clear error when SDMA has no
queues) and `manifest.json`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ccogen._version import __version__
from ccogen.analysis import analyse
from ccogen.codegen.backends.base import (
    Backend,
    Options,
    check_budget,
    manifest_head,
    refuse_buffers,
    shown_source,
)
from ccogen.codegen.files import GeneratedFiles, banner, options_hash
from ccogen.codegen.jinja import render
from ccogen.codegen.layout import HeapLayout, plan_heap
from ccogen.codegen.lower.mori import WAVE, MoriFacts, Part, hw_thread, lower_block, mori_facts
from ccogen.codegen.naming import c_identifier
from ccogen.codegen.plan import Unsupported, block_ops
from ccogen.ir.instance import Instance, IssuerLevel
from ccogen.ir.opkind import OpKind
from ccogen.targets.mori_sdma import CAPABILITIES as CAPS

ARCHES = ("gfx942", "gfx950")
MAX_BLOCK_DIM = CAPS.max_block_threads


# ============================================================================= view-model


@dataclass(frozen=True, slots=True)
class Program:
    rank: int
    block: int
    case: int
    function: str
    parts: tuple[Part, ...]


@dataclass(frozen=True, slots=True)
class Kernel:
    name: str
    symbol: str
    line: int
    blocks: int
    block_dim: int
    programs: tuple[Program, ...]
    barrier: bool


@dataclass(frozen=True, slots=True)
class MoriModel:
    name: str
    banner: str
    source: str
    nranks: int
    queues: int
    heap_size: int
    debug: bool
    kernels: tuple[Kernel, ...]
    entry: str  # prefix of the host entry's C functions
    lsa_barrier_count: int
    wave: int = WAVE
    reduces: bool = False  # print the `reduce` primitives
    runtime: bool = False  # print the run-time value primitives (`ccogen_ld`, ...)


# ============================================================================= backend


class MoriSdma(Backend):
    name = "mori-sdma"
    language = "hip"
    kernel_params = ("devcomm_ptr", "window", "epoch", "debug")

    def generate(self, instance: Instance, source: str, options: Options) -> GeneratedFiles:
        if options.epoch_from_heap:
            raise Unsupported("Options.epoch_from_heap is implemented for nccl-lsa and nvshmem "
                              "only", None)
        if instance.period > 1:
            raise Unsupported("`launch % K` is not generated on `mori-sdma` yet: generate "
                              "for `nccl-lsa` or `nvshmem`", None)
        refuse_buffers(instance, self.name)
        model, layout = self.model(instance, source, options)
        files = {
            "kernels.hip": render("mori_sdma/kernels.hip.j2", model=model),
            "host.cpp": render("mori_sdma/host.cpp.j2", model=model),
            "manifest.json": json.dumps(self.manifest(model, layout, instance, options),
                                        indent=2) + "\n",
        }
        return GeneratedFiles(files)

    def model(self, instance: Instance, source: str,
              options: Options) -> tuple[MoriModel, HeapLayout]:
        if instance.queues > (CAPS.queue_cap or instance.queues):
            raise Unsupported(f"{instance.queues} queues exceed the SDMA cap of {CAPS.queue_cap}",
                              instance.protocol.span)
        source = shown_source(instance, source)  # escaped once, for every file (codegen.text)
        layout = plan_heap(instance, 1)  # its scratch word: zero-length run-time transfers
        facts = mori_facts(instance, analyse(instance), layout, source, options.debug)
        for k in instance.kernels:
            check_budget(k.blocks, options.max_ctas, k.name, k.span)
        kernels = tuple(self.kernel(instance, k.index, facts) for k in instance.kernels)
        opts = {**options.as_dict(), "arch": list(ARCHES), "target": self.name}
        model = MoriModel(
            name=instance.protocol.name, source=source,
            banner=banner(source, __version__, options_hash(opts)), nranks=instance.nranks,
            queues=instance.queues, heap_size=layout.size, debug=options.debug,
            kernels=kernels, entry=c_identifier(instance.protocol.name),
            lsa_barrier_count=1 if any(k.barrier for k in kernels) else 0,
            reduces=any(op.kind.traits.reduces for ops in instance.ranks for op in ops),
            runtime=bool(instance.runtime))
        return model, layout

    def kernel(self, instance: Instance, index: int, facts: MoriFacts) -> Kernel:
        k = instance.kernels[index]
        programs = []
        threads = [k.threads]
        barrier = False
        for rank in range(instance.nranks):
            for block, ops in sorted(block_ops(instance, index, rank).items()):
                parts = lower_block(facts, ops)
                programs.append(Program(rank, block, rank * k.blocks + block,
                                        f"r{rank}_b{block}", parts))
                threads += [hw_thread(op) + (WAVE if op.issuer.lane is None else 1)
                            for op in ops if op.issuer.level is not IssuerLevel.BLOCK]
                barrier = barrier or any(op.kind is OpKind.BARRIER for op in ops)
        if barrier and k.blocks > 1:
            raise Unsupported("`barrier()` in a kernel with several blocks is not supported by "
                              "`mori-sdma` (one LSA barrier slot)", k.span)
        block_dim = -(-max(threads) // WAVE) * WAVE
        if block_dim > MAX_BLOCK_DIM:  # never clamp: the waves past it would not run
            raise Unsupported(f"kernel `{k.name}` needs {block_dim} threads per block "
                              f"(64-thread waves), over the {MAX_BLOCK_DIM} a block can have",
                              k.span)
        return Kernel(name=k.name, symbol=c_identifier(instance.protocol.name, k.name),
                      line=k.span.line if k.span else 0, blocks=k.blocks, block_dim=block_dim,
                      programs=tuple(programs), barrier=barrier)

    def manifest(self, model: MoriModel, layout: HeapLayout, instance: Instance,
                 options: Options) -> dict[str, object]:
        return {
            **manifest_head(self.name, instance, model.source, list(ARCHES), options.debug,
                            layout.size, options.max_ctas),
            "windows": layout.windows_manifest(instance),
            "scratch": {"offset": layout.scratch.offset, "size": layout.scratch.size},
            "kernel_file": "kernels.hip",
            "kernels": [
                {"name": k.name, "symbol": k.symbol, "grid": k.blocks, "block": k.block_dim,
                 # workgroups of one rank may wait on each other's signals: co-resident
                 "shared_mem": 0, "cooperative": k.blocks > 1,
                 "params": list(self.kernel_params)}
                for k in model.kernels],
            "mori": {
                "sdma_queue_count": model.queues,
                "lsa_barrier_count": model.lsa_barrier_count,
                "gda_connection_type": "CCO_GDA_CONNECTION_NONE",
                "host_entry": {"file": "host.cpp", "setup": f"{model.entry}_setup",
                               "teardown": f"{model.entry}_teardown",
                               "unique_id": f"{model.entry}_unique_id"},
                "env": {"MORI_ENABLE_SDMA": "1"},
                "hip_flags": ["-DMORI_CCO_SDMA_DEBUG"] if options.debug else [],
            },
        }


__all__ = ["MoriSdma", "hw_thread"]
