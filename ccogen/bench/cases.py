"""What the benchmark workers run: plain, picklable descriptions of timed cases.

A `CaseSpec` is one instance (generated or reference kernels, or the empty kernel) at one
swept value: where its manifest and cubin are, the `ensure` checks of its verified epochs,
and how to time it.  A `CompareSpec` is one engine collective (NCCL through
torch.distributed) of the same shape.  `WorkerConfig` is everything one rank needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ccogen.rt.data import CheckSpec
from ccogen.rt.drawn import DrawSpec
from ccogen.rt.launch import DEFAULT_INIT_TIMEOUT_S, DEFAULT_WATCHDOG_S


@dataclass(frozen=True)
class Timing:
    """How one case is timed.

    `graph`: capture `epochs_per_sample` epochs' launches once as a CUDA graph and replay
    it (needs kernels that count their own epochs); else launch each epoch's kernels.
    A sample is `epochs_per_sample` epochs between two CUDA events; `warmup` samples run
    first, then `samples` timed ones back to back (no host synchronisation, no checks).
    """

    warmup: int = 5
    samples: int = 50
    epochs_per_sample: int = 1
    graph: bool = False

    @property
    def epochs(self) -> int:
        """Epochs the timed phase runs (warm-up included)."""
        return (self.warmup + self.samples) * self.epochs_per_sample


@dataclass(frozen=True)
class CaseSpec:
    """One timed instance; `key` is unique within a run."""

    key: str
    impl: str                 # generated | reference | empty-kernel
    manifest_dir: str
    cubin: str
    checks: tuple[CheckSpec, ...]
    timing: Timing
    device_epoch: bool = True  # kernels read their epoch from a launch counter
    module_init: bool = True   # register the module with the engine (nvshmem)
    verify_after: bool = True  # one more checked epoch after the timed ones
    timer_offset: int | None = None  # heap offset of (sum ns, one-way trips) words
    timer_rank: int = 0
    # run-time values (ccogen.bench.contents): the contents every verified epoch fills
    # (drawn to satisfy `require`) and the timed epochs then read, unrefilled
    drawn: DrawSpec | None = None
    draw_file: str = ""        # the draw, pickled at planning
    drawn_dir: str = ""        # ... staged as the verified epochs' draws (runner.stage_draws)
    contents: str = ""         # its label (`interior-0`)
    untimed: str = ""          # why the timed epochs would not read valid contents


@dataclass(frozen=True)
class CompareSpec:
    """One engine collective: `kind` alltoall (`all_to_all_single` of nranks * per_peer
    bytes) or allgather (`all_gather_into_tensor` of per_peer bytes per rank)."""

    key: str
    kind: str
    per_peer: int
    warmup: int = 5
    samples: int = 50


@dataclass(frozen=True)
class WorkerConfig:
    """Everything one rank of a benchmark run needs (pickled into spawned processes)."""

    target: str
    nranks: int
    engine: str
    heap_size: int             # the largest heap + local buffers of any case: one allocation
    lsa_barrier_count: int
    cases: tuple[CaseSpec, ...]
    compares: tuple[CompareSpec, ...]
    seed: int
    rendezvous_dir: str
    shared_dir: str
    watchdog_s: float = DEFAULT_WATCHDOG_S
    init_timeout_s: float = DEFAULT_INIT_TIMEOUT_S
    iters: int = 1             # for launch.spawn_ranks's default deadline (unused: see runner)
    env: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    devices: tuple[int, ...] = ()  # rank r runs on devices[r] (rt.placement); () = r


@dataclass
class CaseTimes:
    """What one rank measured for one case (or one collective)."""

    key: str
    times_us: list[float] = field(default_factory=list)  # per epoch, one entry per sample
    mode: str = ""
    verified: bool | None = None
    failures: list[str] = field(default_factory=list)
    note: str = ""
    in_kernel_us: float | None = None
    contents: str = ""        # run-time values: the draw the verified epochs filled


@dataclass
class RankBench:
    """One rank's report."""

    rank: int
    cases: list[CaseTimes] = field(default_factory=list)
    error: str | None = None
    library: str = ""
    device: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None


__all__ = ["CaseSpec", "CaseTimes", "CompareSpec", "RankBench", "Timing", "WorkerConfig"]
