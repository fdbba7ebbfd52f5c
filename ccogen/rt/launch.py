"""Running a generated instance on GPUs: one process per GPU, N epochs, `ensure` checked.

`run(manifest_dir, instance)` (the launcher):
1. checks the GPUs (count, architecture), builds the cubin and the engine shim (cached);
2. spawns one process per rank (`multiprocessing` spawn; device = rank) — or, under
   torchrun / mpirun (`RANK`, `WORLD_SIZE`, `LOCAL_RANK` set), runs this process's rank
   in-process (device = LOCAL_RANK) and reports that rank only;
3. collects one `RankResult` per rank into a `RunReport`.

Per rank (`run_rank`): primary context → engine shim → unique id from rank 0 → engine init
→ one symmetric heap (zeroed: signals and counters start at 0) → device communicator
(nccl-lsa) → cubin loaded (nvshmem: `nvshmemx_cumodule_init`) → epochs.  Each epoch: fill
every window with the seeded bytes, host barrier, CUDA event, every kernel in manifest order
(`epoch` = the epoch index), event, wait (watchdog), host barrier, copy the windows back and
evaluate this rank's `ensure` comparisons.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue as queue_module
import signal
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ccogen.rt.data import (
    MAX_REPORTED_FAILURES,
    CheckSpec,
    evaluate,
    initial_bytes,
    instance_checks,
    make_reader,
    remote_finals,
)
from ccogen.rt.debug import RECORD_SIZE, DebugRecord, describe_wait
from ccogen.rt.errors import (
    EngineError,
    ManifestError,
    NoGpuError,
    NotEnoughGpusError,
    RunError,
)
from ccogen.rt.manifest import KernelSpec, Manifest, load_manifest
from ccogen.rt.report import RankResult, RunReport
from ccogen.rt.requirements import apply_env, check_heap
from ccogen.rt.requirements import read as read_requirements

if TYPE_CHECKING:
    from ccogen.ir.instance import Instance
    from ccogen.rt.engines import Engine, Heap

DEFAULT_WATCHDOG_S = 30.0
DEFAULT_INIT_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class RunConfig:
    """Everything a rank needs; plain data, pickled into spawned processes."""

    manifest_dir: str
    nranks: int
    iters: int
    seed: int
    debug: bool
    cubin: str
    engine: str
    checks: tuple[CheckSpec, ...]
    rendezvous_dir: str
    shared_dir: str
    watchdog_s: float = DEFAULT_WATCHDOG_S
    init_timeout_s: float = DEFAULT_INIT_TIMEOUT_S
    env: tuple[tuple[str, str], ...] = field(default_factory=tuple)


# ============================================================================ the launcher


def run(manifest_dir: str | Path, instance: Instance | None = None, *, iters: int = 100,
        seed: int = 0, debug: bool = False, watchdog_s: float = DEFAULT_WATCHDOG_S,
        checks: Sequence[CheckSpec] | None = None,
        init_timeout_s: float = DEFAULT_INIT_TIMEOUT_S) -> RunReport:
    """Run the instance generated into `manifest_dir` for `iters` epochs and check `ensure`.

    `instance` supplies the `ensure` comparisons (or pass `checks`); with neither, the run
    only times the kernels.  Raises RunError subclasses for set-up problems; `ensure`
    failures and timed-out waits are in the report (`report.ok`).  `watchdog_s` bounds one
    epoch's kernels and each host barrier; `init_timeout_s` bounds the engine's bootstrap.
    """
    if iters < 1:
        raise RunError("iters must be at least 1")
    manifest = load_manifest(manifest_dir)
    if instance is not None:
        _check_instance(manifest, instance)
    specs = tuple(checks) if checks is not None else tuple(instance_checks(instance))
    distributed = _distributed_env()
    if distributed is None:
        _require_gpus(manifest.nranks)
        arch = device_arch(0)
    else:
        arch = device_arch(distributed[2])
    cubin, engine, library = _build(manifest, arch, debug)
    if distributed is not None:
        return _run_distributed(manifest, specs, iters, seed, debug, watchdog_s, cubin, engine,
                                library, distributed)
    with tempfile.TemporaryDirectory(prefix="ccogen-run-") as shared:
        config = RunConfig(str(manifest.directory), manifest.nranks, iters, seed,
                           debug or manifest.debug, str(cubin), str(engine), specs,
                           rendezvous_dir=shared, shared_dir=shared, watchdog_s=watchdog_s,
                           init_timeout_s=init_timeout_s)
        results = _spawn(config)
    return RunReport(manifest.protocol, manifest.target, manifest.nranks, iters, results,
                     library=library)


def _check_instance(manifest: Manifest, instance: Instance) -> None:
    if manifest.nranks != instance.nranks:
        raise ManifestError(f"{manifest.directory}/manifest.json is for {manifest.nranks} "
                            f"ranks, the instance has {instance.nranks}")
    expected = dict(instance.window_sizes)
    found = {w.name: w.size for w in manifest.windows}
    if found != expected:
        raise ManifestError(f"{manifest.directory}/manifest.json windows {found} do not match "
                            f"the instance's {expected}")


def _require_gpus(nranks: int) -> None:
    from ccogen import runtime

    try:
        count = runtime.device_count()
    except runtime.GpuUnavailable as exc:
        raise NoGpuError(f"no NVIDIA GPU found: {exc}") from None
    if count == 0:
        raise NoGpuError("no NVIDIA GPU found: the CUDA driver reports 0 devices "
                         "(check nvidia-smi and CUDA_VISIBLE_DEVICES)")
    if count < nranks:
        raise NotEnoughGpusError(f"protocol needs {nranks} GPUs, this machine has {count}")


def device_arch(ordinal: int) -> str:
    """`sm_XY` of a device (the cubin and the shims are built for it)."""
    from ccogen import runtime

    try:
        major, minor = runtime.compute_capability(ordinal)
    except runtime.GpuUnavailable as exc:
        raise NoGpuError(f"no NVIDIA GPU found: {exc}") from None
    return f"sm_{major}{minor}"


def _build(manifest: Manifest, arch: str, debug: bool) -> tuple[Path, Path, str]:
    from ccogen.rt.build import build_cubin
    from ccogen.rt.engines import build_engine

    cubin = build_cubin(manifest.directory, manifest.target, arch, debug or manifest.debug)
    engine, library = build_engine(manifest.target, arch)
    return cubin, engine, library.describe()


def _distributed_env() -> tuple[int, int, int] | None:
    """(rank, world size, local rank) when started by torchrun / mpirun, else None."""
    env = os.environ
    rank = env.get("RANK", env.get("OMPI_COMM_WORLD_RANK"))
    world = env.get("WORLD_SIZE", env.get("OMPI_COMM_WORLD_SIZE"))
    local = env.get("LOCAL_RANK", env.get("OMPI_COMM_WORLD_LOCAL_RANK"))
    if rank is None or world is None or local is None:
        return None
    try:
        return int(rank), int(world), int(local)
    except ValueError:
        raise RunError(f"RANK/WORLD_SIZE/LOCAL_RANK must be integers, not "
                       f"{rank!r}/{world!r}/{local!r}") from None


def _run_distributed(manifest: Manifest, specs: tuple[CheckSpec, ...], iters: int, seed: int,
                     debug: bool, watchdog_s: float, cubin: Path, engine: Path, library: str,
                     where: tuple[int, int, int]) -> RunReport:
    from ccogen.rt.rendezvous import FileRendezvous, from_environment, job_id

    rank, world, local = where
    if world != manifest.nranks:
        raise RunError(f"protocol instance has {manifest.nranks} ranks, the job has "
                       f"WORLD_SIZE={world}")
    rendezvous = from_environment(rank, manifest.protocol)
    base = Path(os.environ.get("CCOGEN_RENDEZVOUS_DIR", "/tmp/ccogen-rendezvous"))
    shared = base / f"{job_id()}-{manifest.protocol}-data"
    shared.mkdir(parents=True, exist_ok=True)
    directory = rendezvous.directory if isinstance(rendezvous, FileRendezvous) else shared
    config = RunConfig(str(manifest.directory), manifest.nranks, iters, seed,
                       debug or manifest.debug, str(cubin), str(engine), specs,
                       rendezvous_dir=str(directory), shared_dir=str(shared),
                       watchdog_s=watchdog_s)
    def on_hang(result: RankResult) -> None:
        report = RunReport(manifest.protocol, manifest.target, manifest.nranks, iters, [result],
                           library=library, partial=True)
        sys.stderr.write(report.format() + "\n")
        sys.stderr.flush()
        os._exit(1)

    result = run_rank(config, rank, local, rendezvous, on_hang)
    return RunReport(manifest.protocol, manifest.target, manifest.nranks, iters, [result],
                     library=library, partial=True)


def _spawn(config: Any, main: Callable[..., None] | None = None,
           failed: Callable[[int, str], Any] | None = None,
           deadline_s: float | None = None) -> list[Any]:
    """One process per rank; wait for every report; stop the rest once one rank failed.

    `main(config, rank, results_queue)` is the rank's entry point (`_worker_main`), each
    report has `.rank` and `.ok`, and `failed(rank, text)` makes the report of a rank
    that never sent one; `deadline_s` bounds the whole run (default: from `iters`).
    `config` needs `nranks`, `watchdog_s`, `init_timeout_s` and `shared_dir`.
    """
    main = main or _worker_main
    failed = failed or (lambda rank, text: RankResult(rank, rank, error=text))
    mp = multiprocessing.get_context("spawn")
    results_queue: Any = mp.Queue()
    procs = [mp.Process(target=main, args=(config, rank, results_queue),
                        name=f"ccogen-rank-{rank}") for rank in range(config.nranks)]
    for p in procs:
        p.start()
    results: dict[int, Any] = {}
    dead_since: dict[int, float] = {}
    first_failure: float | None = None
    grace = config.watchdog_s + 15.0
    if deadline_s is None:
        deadline_s = config.init_timeout_s + config.iters * (3 * config.watchdog_s + 5.0)
    deadline = time.monotonic() + deadline_s
    try:
        while len(results) < config.nranks:
            try:
                got = results_queue.get(timeout=0.2)
                results[got.rank] = got
                if not got.ok and first_failure is None:
                    first_failure = time.monotonic()
                continue
            except queue_module.Empty:
                pass
            now = time.monotonic()
            for rank, p in enumerate(procs):
                if rank in results or p.is_alive():
                    continue
                dead_since.setdefault(rank, now)
                if now - dead_since[rank] > 2.0:  # its report, if any, would have arrived
                    results[rank] = failed(rank, (
                        f"rank {rank} exited with code {p.exitcode} without a report "
                        "(crashed; rerun with NCCL_DEBUG=WARN / NVSHMEM_DEBUG=WARN)"))
                    first_failure = first_failure or now
            stop = None
            if first_failure is not None and now - first_failure > grace:
                stop = "stopped: another rank had failed"
            elif now > deadline:
                stop = "stopped: the run exceeded its overall time limit"
            if stop is not None:
                for rank in range(config.nranks):
                    if rank not in results:
                        where = _where_stuck(config, rank, procs[rank])
                        results[rank] = failed(rank, f"{stop}; {where}")
    finally:
        for p in procs:
            p.join(timeout=5.0)
            if p.is_alive():
                p.kill()
                p.join(timeout=5.0)
        results_queue.close()
    return [results[r] for r in range(config.nranks)]


def _where_stuck(config: Any, rank: int, proc: Any) -> str:
    """The phase a rank that did not report was in, and its Python stack (SIGUSR1 makes
    the worker's faulthandler write it; see _worker_main)."""
    shared = Path(config.shared_dir)
    phase = _read_text(shared / f"rank{rank}.phase") or "starting"
    text = f"rank {rank} was at: {phase}"
    if proc.is_alive() and proc.pid is not None:
        try:
            os.kill(proc.pid, signal.SIGUSR1)
            time.sleep(0.5)
        except OSError:
            return text
        stack = _read_text(shared / f"rank{rank}.stack")
        if stack:
            lines = [ln for ln in stack.splitlines() if ln.strip()][:12]  # innermost first
            text += "\n      " + "\n      ".join(lines)
    return text


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""


def _worker_main(config: RunConfig, rank: int, results_queue: Any) -> None:
    """Entry point of a spawned rank: run, report, and leave without interpreter teardown
    (after a trapped kernel the context is broken and library exit handlers could hang)."""
    import faulthandler

    from ccogen.rt.rendezvous import FileRendezvous

    Path(config.shared_dir).mkdir(parents=True, exist_ok=True)
    stack_file = open(Path(config.shared_dir) / f"rank{rank}.stack", "w")  # noqa: SIM115
    faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=True)
    def report(result: RankResult) -> None:
        results_queue.put(result)
        results_queue.close()
        results_queue.join_thread()
        os._exit(0)

    report(run_rank(config, rank, rank, FileRendezvous(Path(config.rendezvous_dir)), report))


# ============================================================================ one rank


class _Stop(Exception):
    """Ends a rank's epochs; the RankResult already says why."""


def run_rank(config: RunConfig, rank: int, device: int, rendezvous: Any,
             on_hang: Callable[[RankResult], None]) -> RankResult:
    """Run every epoch on this rank; never raises (problems are in the result).

    `on_hang(result)` is called from a watchdog thread when a driver call itself does not
    return within the watchdog (the main thread is then stuck): it must report and exit.
    """
    result = RankResult(rank, device)
    state = _Rank(config, rank, device, rendezvous, result, on_hang)
    try:
        state.run()
    except _Stop:
        pass
    except RunError as exc:
        result.error = str(exc)
    except Exception as exc:
        from ccogen import _ccogen_rt

        if isinstance(exc, _ccogen_rt.CudaError | _ccogen_rt.CudaUnavailable):
            result.error = str(exc)
        else:
            import traceback

            result.error = f"internal error: {exc!r}\n{traceback.format_exc()}"
    if not result.ok:
        # Never free driver objects after a failure: a kernel may still be spinning, and
        # cuModuleUnload / cuMemFreeHost wait for it (holding the GIL, in a destructor).
        # The process reports and exits without running destructors.
        _ABANDONED.append(state)
    return result


_ABANDONED: list[Any] = []


class _Rank:
    def __init__(self, config: RunConfig, rank: int, device: int, rendezvous: Any,
                 result: RankResult, on_hang: Callable[[RankResult], None]) -> None:
        self.config = config
        self.on_hang = on_hang
        self.rank = rank
        self.device = device
        self.rendezvous = rendezvous
        self.result = result
        self.manifest = load_manifest(config.manifest_dir)
        self.checks = [c for c in config.checks if c.rank == rank]
        self.exports = {w for (w, r) in remote_finals(config.checks) if r == rank}
        self.imports = {(w, r) for (w, r) in remote_finals(self.checks)}
        result.checks_per_epoch = len(self.checks)

    def attach(self, rt: Any, ctx: Any, stream: Any) -> None:
        """Use a context and stream made elsewhere (`ccogen.bench` runs many instances on
        one engine and heap, and checks one epoch of each through `_epoch`)."""
        self.rt, self.ctx, self.stream = rt, ctx, stream
        self.start, self.end = rt.Event(), rt.Event()

    # -- set-up ------------------------------------------------------------------------------
    def run(self) -> None:
        from ccogen import _ccogen_rt as rt

        self.rt = rt
        self._phase("CUDA context")
        self.ctx = rt.Context(self.device)
        self.engine = engine = self._engine()
        self._phase("heap allocation")
        self.heap = heap = engine.heap_alloc(self.manifest.heap_size)
        check_heap(self.requirements, heap.pointer)
        rt.memset_d8(heap.pointer, 0, self.manifest.heap_size)  # signals and counters at 0
        self.ctx.synchronize()
        engine.barrier(self.config.init_timeout_s)
        devcomm = b""
        if any("devcomm" in k.params for k in self.manifest.kernels):
            self._phase("device communicator")
            devcomm = engine.devcomm(self.manifest.lsa_barrier_count)
        self._phase("module load")
        self.module = module = rt.Module(Path(self.config.cubin).read_bytes())
        engine.module_init(module.handle)
        self.functions = functions = [module.function(k.symbol) for k in self.manifest.kernels]
        self.record = record = rt.HostMapped(RECORD_SIZE) if self.config.debug else None
        # Non-blocking: never ordered behind the legacy default stream, which the engines'
        # own threads may use while a kernel of ours waits on a peer.
        self.stream = rt.Stream(True)
        self.start, self.end = rt.Event(), rt.Event()
        for epoch in range(self.config.iters):
            self._epoch(epoch, engine, heap, devcomm, functions, record)
        self._phase("teardown")
        self.stream.synchronize()
        engine.module_finalize(module.handle)
        module.unload()
        engine.finalize()
        self._phase("done")

    def _phase(self, what: str) -> None:
        """Where this rank is, for the launcher's message if it has to stop the rank."""
        with contextlib.suppress(OSError):
            (Path(self.config.shared_dir) / f"rank{self.rank}.phase").write_text(what)

    def _engine(self) -> Engine:
        from ccogen.rt.engines import Engine
        from ccogen.rt.toolchain import find_library

        self.requirements = read_requirements(self.config.manifest_dir, self.manifest.target)
        apply_env(self.requirements)  # before the engine reads its environment
        heap = self.manifest.heap_size
        if self.manifest.target == "nvshmem" and heap > (900 << 20):
            os.environ.setdefault("NVSHMEM_SYMMETRIC_SIZE", str((heap + (256 << 20)) >> 20 << 20))
        engine = Engine(self.manifest.target, Path(self.config.engine),
                        find_library(self.manifest.target))
        self.result.library = engine.library.describe()
        self._phase(f"{self.manifest.target} engine bootstrap")
        if self.rank == 0:
            uid = engine.unique_id()
            self.rendezvous.publish(uid)
        else:
            uid = self.rendezvous.fetch(int(engine.lib.ccogen_unique_id_size()),
                                        self.config.init_timeout_s)
        engine.init(self.rank, self.config.nranks, self.device, uid)
        self.ctx.make_current()
        if self.rank == 0 and hasattr(self.rendezvous, "path"):
            self.rendezvous.path.unlink(missing_ok=True)  # init is collective: all have read it
        return engine

    # -- one epoch ---------------------------------------------------------------------------
    def _epoch(self, epoch: int, engine: Engine, heap: Heap, devcomm: bytes,
               functions: list[Any], record: Any) -> None:
        rt, m, watchdog = self.rt, self.manifest, self.config.watchdog_s
        self._phase(f"epoch {epoch}: filling windows")
        for w in m.windows:
            data = initial_bytes(self.config.seed, epoch, self.rank, w.name, w.size)
            rt.memcpy_htod(heap.pointer + w.offset, data)
        self.ctx.synchronize()  # pageable copies complete before any peer may read them
        self._barrier(engine, "before the kernels", epoch)
        done = False
        self._phase(f"epoch {epoch}: kernels")
        backstop = self._arm_backstop(epoch, record)
        try:
            self.start.record(self.stream)
            for spec, fn in zip(m.kernels, functions, strict=True):
                rt.launch(fn, spec.grid, spec.block, spec.shared_mem,
                          self._params(spec, epoch, devcomm, heap, record), self.stream,
                          spec.cooperative)
            self.end.record(self.stream)
            done = self.stream.wait(watchdog)
        except (rt.CudaError, rt.CudaUnavailable) as exc:
            backstop.cancel()
            self._kernel_failed(epoch, record, str(exc))
        backstop.cancel()
        if not done:
            self._kernel_failed(epoch, record, None)
        self.result.times_ms.append(self.end.elapsed_ms_since(self.start))
        self._barrier(engine, "after the kernels", epoch)
        self._phase(f"epoch {epoch}: checking")
        finals = self._finals(heap)
        if self.exports or self.imports:
            self._exchange(epoch, engine, finals)
        sizes = {w.name: w.size for w in m.windows}
        failures = evaluate(self.checks, make_reader(self.config.seed, epoch, sizes, finals),
                            epoch)
        self.result.failure_count += len(failures)
        room = MAX_REPORTED_FAILURES - len(self.result.failures)
        self.result.failures.extend(failures[:max(0, room)])
        self.result.epochs = epoch + 1

    def _params(self, spec: KernelSpec, epoch: int, devcomm: bytes, heap: Heap,
                record: Any) -> list[tuple[str, bytes]]:
        values = {
            "devcomm": devcomm,
            "window": struct.pack("<Q", heap.window),
            "heap": struct.pack("<Q", heap.pointer),
            "epoch": struct.pack("<Q", epoch),
            "debug": struct.pack("<Q", record.device_pointer if record is not None else 0),
        }
        return [(kind, values[kind]) for kind in spec.params]

    def _barrier(self, engine: Engine, when: str, epoch: int) -> None:
        self._phase(f"epoch {epoch}: host barrier {when}")
        try:
            engine.barrier(self.config.watchdog_s)
        except EngineError as exc:
            self.result.error = f"rank {self.rank}, epoch {epoch}, {when}: {exc}"
            raise _Stop from None

    def _arm_backstop(self, epoch: int, record: Any) -> threading.Timer:
        """Reports the hang from another thread if the main thread's driver calls do not
        come back (the stream watchdog needs cuStreamQuery to return)."""
        def fire() -> None:
            with contextlib.suppress(_Stop):
                self._kernel_failed(epoch, record, None)
            if self.result.error is not None:
                self.result.error += " (a CUDA driver call did not return)"
            self.on_hang(self.result)

        timer = threading.Timer(self.config.watchdog_s + 5.0, fire)
        timer.daemon = True
        timer.start()
        return timer

    def _kernel_failed(self, epoch: int, record: Any, error: str | None) -> None:
        """A launch failed or the watchdog tripped: name the wait if the record has one."""
        m = self.manifest
        if record is not None:
            rec = DebugRecord.parse(record.read(0, RECORD_SIZE))
            if rec.hit:
                self.result.wait = describe_wait(rec, m.source, [c.name for c in m.counters])
                raise _Stop
        if error is None:
            hint = ("; no wait reported its timeout" if self.config.debug else
                    "; rerun with --debug to name the wait that hangs")
            self.result.error = (f"rank {self.rank}, epoch {epoch}: the kernels did not finish "
                                 f"within {self.config.watchdog_s:g} s{hint}")
        else:
            self.result.error = f"rank {self.rank}, epoch {epoch}: {error}"
        raise _Stop

    def _finals(self, heap: Heap) -> dict[tuple[str, int], Any]:
        import numpy as np

        return {(w.name, self.rank): np.frombuffer(
                    self.rt.memcpy_dtoh(heap.pointer + w.offset, w.size), dtype=np.uint8)
                for w in self.manifest.windows}

    def _exchange(self, epoch: int, engine: Engine, finals: dict[tuple[str, int], Any]) -> None:
        """Final windows that other ranks' checks read, through the shared directory."""
        import numpy as np

        shared = Path(self.config.shared_dir)
        shared.mkdir(parents=True, exist_ok=True)
        mine = []
        for w in sorted(self.exports):
            path = shared / f"final-{epoch}-{self.rank}-{w}.bin"
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(finals[(w, self.rank)].tobytes())
            os.replace(tmp, path)
            mine.append(path)
        self._barrier(engine, "exporting final windows", epoch)
        for w, r in self.imports:
            data = (shared / f"final-{epoch}-{r}-{w}.bin").read_bytes()
            finals[(w, r)] = np.frombuffer(data, dtype=np.uint8)
        self._barrier(engine, "importing final windows", epoch)
        for path in mine:
            path.unlink(missing_ok=True)


__all__ = ["DEFAULT_WATCHDOG_S", "RunConfig", "device_arch", "run", "run_rank"]
