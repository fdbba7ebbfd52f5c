"""One rank's CUDA context, engine, symmetric heap and stream, set up once per process.

`ccogen run` (ccogen.rt.launch) and `ccogen bench` (ccogen.bench.worker) both open a
`RankSession` in each rank's process: primary context → engine shim → unique id from rank 0
→ engine init → one symmetric heap, zeroed (signals and counters start at 0) → host barrier
→ device communicator (when asked) → one non-blocking stream.  What differs between targets
comes from their `EngineSpec` (ccogen.targets): the heap-size variable the engine reads
before it bootstraps, whether it registers modules.

Also shared by both: `Stop` (ends a rank; its result already says why), the text a rank
reports for an exception (`failure_text`), the stack dump a stuck rank writes on SIGUSR1
(`dump_stack_on_signal`), and `abandon` (driver objects of a failed rank are never freed).
"""

from __future__ import annotations

import contextlib
import os
import signal
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ccogen.errors import RunError
from ccogen.rt import native
from ccogen.rt.rendezvous import open_private
from ccogen.rt.requirements import EngineRequirements, apply_env, check_heap
from ccogen.rt.watchdog import fault_stall, stall_forever, write_phase
from ccogen.targets.base import BUFFER_ALIGN

if TYPE_CHECKING:
    from ccogen.manifest import KernelSpec
    from ccogen.rt.engines import Engine, Heap


class Stop(Exception):
    """Ends a rank's work; the rank's result already says why."""


class HasLibrary(Protocol):
    """A rank's report: it names the engine library once the shim is loaded."""

    library: str


class RankSession:
    """One rank's context, engine, heap, device communicator and stream (module docstring).

    `open_context()` then `open_engine(...)` set it up; `close()` finalizes the engine.
    `phase(what)` records where the rank is, for the launcher's message if it must stop
    the rank (`rank<N>.phase` in the shared directory).
    """

    def __init__(self, *, target: str, engine_path: str, rank: int, nranks: int, device: int,
                 rendezvous: Any, shared_dir: str, init_timeout_s: float) -> None:
        self.target = target
        self.engine_path = engine_path
        self.rank = rank
        self.nranks = nranks
        self.device = device
        self.rendezvous = rendezvous
        self.shared_dir = shared_dir
        self.init_timeout_s = init_timeout_s
        self.heap_size = 0
        self.devcomm = b""
        # the manifest's engine environment and heap alignment (`ccogen.rt.requirements`);
        # None: the engine's defaults, any heap base
        self.requirements: EngineRequirements | None = None

    def phase(self, what: str, limit_s: float | None = None) -> None:
        """Where this rank is, for the launcher, which stops a rank that stays in one phase
        past its limit (`limit_s`, else the run's watchdog; ccogen.rt.watchdog)."""
        with contextlib.suppress(OSError):
            write_phase(phase_file(self.shared_dir, self.rank), what, limit_s)
        if fault_stall(self.rank, what):
            stall_forever()

    # -- set-up ------------------------------------------------------------------------------
    def open_context(self) -> None:
        """The native extension and the device's primary context."""
        self.rt = native.load()
        self.phase("CUDA context")
        self.ctx = self.rt.Context(self.device)

    def open_engine(self, heap_size: int, devcomm_barriers: int | None,
                    report: HasLibrary) -> None:
        """Bootstrap the engine, allocate and zero one heap of `heap_size` bytes, wait for
        every rank, make the device communicator (`devcomm_barriers` LSA barriers; None:
        none) and the stream.  `report.library` names the engine library once known."""
        self.heap_size = heap_size
        self.engine = engine = self._bootstrap(report)
        self.phase("heap allocation")
        self.heap: Heap = engine.heap_alloc(heap_size)
        if self.requirements is not None:
            check_heap(self.requirements, self.heap.pointer)
        self.zero_heap()
        self.phase("host barrier after the heap allocation", self.init_timeout_s)
        engine.barrier(self.init_timeout_s)
        if devcomm_barriers is not None:
            self.phase("device communicator")
            self.devcomm = engine.devcomm(devcomm_barriers)
        # Non-blocking: never ordered behind the legacy default stream, which the engines'
        # own threads may use while a kernel of ours waits on a peer.
        self.stream = self.rt.Stream(True)

    def _bootstrap(self, report: HasLibrary) -> Engine:
        """Load the shim, exchange the unique id through the rendezvous, init the engine."""
        from ccogen.rt.engines import Engine
        from ccogen.toolchains.libraries import engine_spec, find_library

        if self.requirements is not None:
            apply_env(self.requirements)  # before the engine reads its environment
        for key, value in engine_spec(self.target).heap.environment(self.heap_size).items():
            os.environ.setdefault(key, value)
        engine = Engine(self.target, Path(self.engine_path), find_library(self.target))
        report.library = engine.library.describe()
        self.phase(f"{self.target} engine bootstrap", self.init_timeout_s)
        if self.rank == 0:
            uid = engine.unique_id()
            self.rendezvous.publish(uid)
        else:
            uid = self.rendezvous.fetch(int(engine.lib.ccogen_unique_id_size()),
                                        self.init_timeout_s)
        engine.init(self.rank, self.nranks, self.device, uid)
        self.ctx.make_current()
        if self.rank == 0 and hasattr(self.rendezvous, "path"):
            self.rendezvous.path.unlink(missing_ok=True)  # init is collective: all have read it
        return engine

    def zero_heap(self) -> None:
        """Every heap byte 0 (signals, counters, launch counters), finished on the device."""
        self.rt.memset_d8(self.heap.pointer, 0, self.heap_size)
        self.ctx.synchronize()

    # -- launches ----------------------------------------------------------------------------
    def kernel_params(self, spec: KernelSpec, epoch: int, record: Any,
                      buffers: Mapping[str, int] | None = None) -> list[tuple[str, bytes]]:
        """The arguments of one kernel launch, in the kinds and order its manifest lists;
        `buffers`: the device address of each local buffer (`buffer:NAME`)."""
        values = {
            "devcomm": self.devcomm,
            "window": struct.pack("<Q", self.heap.window),
            "heap": struct.pack("<Q", self.heap.pointer),
            "epoch": struct.pack("<Q", epoch),
            "debug": struct.pack("<Q", record.device_pointer if record is not None else 0),
        }
        for name, pointer in (buffers or {}).items():
            if pointer % BUFFER_ALIGN:
                raise RunError(f"local buffer `{name}` starts at {pointer:#x}, "
                               f"{pointer % BUFFER_ALIGN} bytes past a {BUFFER_ALIGN}-byte "
                               "boundary: the generated kernels move local buffers in "
                               f"{BUFFER_ALIGN}-byte vectors; place it on a {BUFFER_ALIGN}-byte "
                               "boundary")
            values[f"buffer:{name}"] = struct.pack("<Q", pointer)
        missing = [kind for kind in spec.params if kind not in values]
        if missing:
            raise RunError(f"kernel `{spec.name}` takes {', '.join(missing)}, which this launcher "
                           "does not provide (local buffers are passed by `ccogen run`, "
                           "`ccogen bench` and the PyTorch binding): this is a bug in ccogen")
        return [(kind, values[kind]) for kind in spec.params]

    # -- teardown ----------------------------------------------------------------------------
    def close(self) -> None:
        """Wait for the stream, then finalize the engine (after a success only: see
        `abandon`)."""
        self.stream.synchronize()
        self.engine.finalize()


def phase_file(shared_dir: str | Path, rank: int) -> Path:
    return Path(shared_dir) / f"rank{rank}.phase"


def stack_file(shared_dir: str | Path, rank: int) -> Path:
    return Path(shared_dir) / f"rank{rank}.stack"


def dump_stack_on_signal(shared_dir: str, rank: int) -> None:
    """SIGUSR1 makes this process write every thread's Python stack to the rank's stack
    file (the launcher reads it to say where a rank that never reported is stuck)."""
    import faulthandler

    Path(shared_dir).mkdir(parents=True, exist_ok=True)
    # never through a planted link; the file lives as long as the process
    stack = os.fdopen(open_private(stack_file(shared_dir, rank)), "w")
    faulthandler.register(signal.SIGUSR1, file=stack, all_threads=True)


def failure_text(exc: Exception, cuda_prefix: str = "") -> str:
    """What a rank reports for an exception that ended it: a set-up problem's or a CUDA
    error's message (the latter after `cuda_prefix`), else an internal error with its
    traceback."""
    if isinstance(exc, RunError):
        return str(exc)
    if native.is_cuda_error(exc):
        return f"{cuda_prefix}{exc}"
    import traceback

    return f"internal error: {exc!r}\n{traceback.format_exc()}"


_ABANDONED: list[Any] = []


def abandon(state: Any) -> None:
    """Keep a failed rank's driver objects alive until the process exits.

    Never free driver objects after a failure: a kernel may still be spinning, and
    cuModuleUnload / cuMemFreeHost wait for it (holding the GIL, in a destructor).  The
    process reports and exits without running destructors.
    """
    _ABANDONED.append(state)


__all__ = ["HasLibrary", "RankSession", "Stop", "abandon", "dump_stack_on_signal",
           "failure_text", "phase_file", "stack_file"]
