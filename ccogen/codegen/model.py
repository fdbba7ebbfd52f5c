"""The view-model the templates print: steps, segments, per-rank block programs.

Everything a template needs is computed here or in a backend module (offsets, peers,
expected values, launch sizes); templates only iterate and format.
"""

from __future__ import annotations

from dataclasses import dataclass, field

LOCAL = -1  # `peer` of an address on the executing rank
# `peer` of an address in local buffer i (language v2 `buffer`, a kernel parameter):
# BUFFER0 - i.  Such an address is an offset into the caller's tensor, not the heap.
BUFFER0 = -2


def buffer_peer(index: int) -> int:
    """The `peer` value that names local buffer `index` (0-based, declaration order)."""
    return BUFFER0 - index


@dataclass(frozen=True, slots=True)
class Reduction:
    """What a `reduce` step combines, decided here and printed by the templates.

    `srcs` are (peer, offset) addresses like a copy's (`LOCAL`, a rank, or a buffer:
    `buffer_peer`), combined in list order.  `ctype` is the element's C type, `acc` the
    accumulator's (f32 for f16/bf16, the type itself otherwise: integers wrap as the
    simulator's do), `weights` C literals of the accumulator type (empty: unweighted),
    `vector` the bytes one load moves (16 when every heap address and the length allow
    it; the device code still checks a buffer's base address at run time), `elements`
    the element count.  `kinds`: for a converting `reduce` (a source's float type is not
    `dst`'s), each source's `CCOGEN_F32`/`CCOGEN_F16`/`CCOGEN_BF16` code, and `widths` its
    element bytes (both empty otherwise).
    """

    op: str  # sum | max | min
    dtype: str
    ctype: str
    acc: str
    srcs: tuple[tuple[int, int], ...]
    weights: tuple[str, ...]
    vector: int
    elements: int
    kinds: tuple[str, ...] = ()
    widths: tuple[int, ...] = ()  # a converting `reduce`: each source's element bytes

    def source_bytes(self, k: int, nbytes: int) -> int:
        """Bytes source `k` covers when `dst` covers `nbytes`."""
        return self.elements * self.widths[k] if self.widths else nbytes


@dataclass(frozen=True, slots=True)
class Spread:
    """Rows of a `warps`/`lanes` fork spread over every warp of the group (codegen.spread).

    Item i (of `items`, taken by grid stride) is branch `i % branches`, iteration
    `t = i // (branches * chunks)`, chunk `i // branches % chunks`; `cases[b]` are the
    steps of branch b's item (comments, and `chunk` copies whose texts use `t`).
    """

    branches: int
    iterations: int
    chunks: int
    chunk_bytes: int
    cases: tuple[tuple[Step, ...], ...]

    @property
    def items(self) -> int:
        return self.branches * self.iterations * self.chunks

    @property
    def per_iteration(self) -> int:
        return self.branches * self.chunks


@dataclass(frozen=True, slots=True)
class Step:
    """One primitive of the generated program.

    kinds: `comment` (text), `copy` (dst_peer/dst_off <- src_peer/src_off, nbytes, vec),
    `signal` (atomic add `value` at heap offset `off` on rank `peer`, release),
    `wait` (acquire-spin until the local word at `off` >= `value` + epoch * `per_epoch`),
    `sync` (barrier of the executing scope; `seq` numbers group syncs), `fence`, `quiet`,
    `barrier` (the whole team), `reset` (store 0 at local `off`), `reduce` (element-wise
    combine of `reduction.srcs` into dst_peer/dst_off, `nbytes`; split over the CTAs of
    the group like a copy), `putsig` (a fused
    copy + signal where the backend has one: copy fields plus sig_off/value/peer),
    `putcounted` (a copy to `dst_peer` whose `nbytes` the engine itself adds to the
    peer's counter at `off` after the data: NCCL CFT `putCounted`, NVSHMEM
    `putmem_signal_counted`), `waitcounted` (a `wait` through the engine's counted or
    fabric-aware wait, with the fields of `wait`), `fabacquire` (after a wait on a signal
    slot where counted data comes through the fabric proxy: the fabric -> generic acquire).

    Split over the CTAs of a group (codegen.ctasplit; `value` of a wait stays the
    checker's count, the word is compared with it times `scale`): `ctasync` (this CTA's
    threads meet; no other CTA), `csignal` (thread 0 of every CTA adds `value` on
    `peer`), `cwait` (thread 0 of every CTA spins), `cputsig` (every CTA puts its slice
    and adds `value`).
    """

    kind: str
    text: str = ""
    peer: int = LOCAL
    off: int = 0
    value: int = 0
    per_epoch: int = 0
    dst_peer: int = LOCAL
    dst_off: int = 0
    src_peer: int = LOCAL
    src_off: int = 0
    nbytes: int = 0
    vec: bool = False
    seq: int = 0
    line: int = 0
    src: int = -1
    queue: int = -1
    wait_kind: int = 0  # 1 wait_signal, 2 wait_count
    scale: int = 1  # a signal slot's word counts signals x scale (codegen.ctasplit)
    reduction: Reduction | None = None  # `reduce`: dst_peer/dst_off/nbytes + this
    # run-time values (language v2 §3): C expressions that replace the static fields of
    # the same name (`dst_off`, `src_off`, `nbytes`, `value`, `vec`) where the op's
    # regions or count are only known on the device; the static fields then hold the
    # footprint (what the op may touch), for the passes that reason over addresses
    rt: tuple[tuple[str, str], ...] = ()
    let: tuple[tuple[str, str], ...] = ()  # (name, C expression) the `rt` texts use
    # `loop` (codegen.reroll): `body` run `value` times, `t` counting from 0
    body: tuple[Step, ...] = ()
    # `spread` (codegen.spread): the persistent loop over a fork's rows; `chunk`: one of
    # its copies, the `chunk`-th `value` bytes of the row
    spread: Spread | None = None

    def _c(self, name: str, static: str) -> str:
        for key, text in self.rt:
            if key == name:
                return text
        return static

    @property
    def c_dst_off(self) -> str:
        return self._c("dst_off", f"{self.dst_off}ULL")

    @property
    def c_src_off(self) -> str:
        return self._c("src_off", f"{self.src_off}ULL")

    @property
    def c_nbytes(self) -> str:
        return self._c("nbytes", f"{self.nbytes}ULL")

    @property
    def c_value(self) -> str:
        return self._c("value", f"{self.value}ULL")

    @property
    def c_seq(self) -> str:
        return self._c("seq", f"{self.seq}ULL")

    @property
    def c_vec(self) -> str:
        return self._c("vec", "true" if self.vec else "false")

    @property
    def c_srcs(self) -> tuple[tuple[int, str], ...]:
        """A `reduce`'s sources as (peer, C offset): `src0`, `src1`... in `rt` replace
        the static offsets (a folded loop's, codegen.reroll)."""
        if self.reduction is None:
            return ()
        return tuple((peer, self._c(f"src{i}", f"{off}ULL"))
                     for i, (peer, off) in enumerate(self.reduction.srcs))


@dataclass(frozen=True, slots=True)
class Branch:
    """Code run by one warp (`scope == "warp"`) or one thread (`"thread"`) of the group."""

    scope: str
    index: int
    steps: tuple[Step, ...]


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

    @property
    def function(self) -> str:
        return f"r{self.rank}_b{self.block}"

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
    # How the programs are declared: `__forceinline__` keeps the context in registers,
    # `__noinline__` keeps a kernel with very many steps quick to compile (backends.sm).
    program_qualifier: str = "__noinline__"

    @property
    def grid(self) -> int:
        return self.blocks * self.ctas_per_block

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
    # How the step primitives are declared (`CCOGEN_STEP_INLINE`): out of line where a
    # kernel's programs are (backends.sm): inlined at every step, ptxas took minutes
    step_qualifier: str = "__forceinline__"


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
