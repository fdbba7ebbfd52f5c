"""Running a generated instance on GPUs: one process per GPU, N epochs, `ensure` checked.

`run(manifest_dir, instance)` (the launcher):
1. checks the GPUs (count, architecture), builds the cubin and the engine shim (cached);
2. spawns one process per rank (`multiprocessing` spawn; device = rank) — or, under
   torchrun / mpirun (`RANK`, `WORLD_SIZE`, `LOCAL_RANK` set), runs this process's rank
   in-process (device = LOCAL_RANK) and reports that rank only;
3. collects one `RankResult` per rank into a `RunReport`.

Per rank (`run_rank`): the rank's session (ccogen.rt.session: primary context → engine
shim → unique id from rank 0 → engine init → one symmetric heap, zeroed → device
communicator when a kernel takes one) → cubin loaded (and registered where the engine
wants it: nvshmem's `nvshmemx_cumodule_init`) → epochs.  Each epoch: fill
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
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ccogen.errors import (
    EngineError,
    ManifestError,
    NoGpuError,
    RunError,
)
from ccogen.manifest import HEAP_ALIGN, Manifest, load_manifest
from ccogen.rt import native
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
from ccogen.rt.drawn import DrawSpec, EpochDraw, load_epoch, precompute
from ccogen.rt.placement import Placement, check_residency, place
from ccogen.rt.report import RankResult, RunReport
from ccogen.rt.requirements import read as read_requirements
from ccogen.rt.session import (
    RankSession,
    Stop,
    abandon,
    dump_stack_on_signal,
    failure_text,
    phase_file,
    stack_file,
)
from ccogen.rt.watchdog import STALL_MARGIN_S, read_phase, stalled

if TYPE_CHECKING:
    from ccogen.ir.instance import Instance

DEFAULT_WATCHDOG_S = 30.0
DEFAULT_INIT_TIMEOUT_S = 180.0
BUILD_NOTICE_S = 15.0  # a build says it is still going every this many seconds


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
    devices: tuple[int, ...] = ()  # rank r runs on devices[r] (ccogen.rt.placement); () = r
    # run-time values (language v2 §3): each epoch's contents are drawn to satisfy
    # `require`, and its checks come from the instance of those contents (ccogen.rt.drawn)
    drawn: DrawSpec | None = None
    drawn_dir: str = ""  # where the launcher put every epoch's draw (ccogen.rt.drawn)


# ============================================================================ the launcher


def run(manifest_dir: str | Path, instance: Instance | None = None, *, iters: int = 100,
        seed: int = 0, debug: bool = False, watchdog_s: float = DEFAULT_WATCHDOG_S,
        checks: Sequence[CheckSpec] | None = None,
        init_timeout_s: float | None = None,
        placement: Placement | None = None) -> RunReport:
    """Run the instance generated into `manifest_dir` for `iters` epochs and check `ensure`.

    `instance` supplies the `ensure` comparisons (or pass `checks`); with neither, the run
    only times the kernels.  Raises RunError subclasses for set-up problems; `ensure`
    failures and timed-out waits are in the report (`report.ok`).  `watchdog_s` bounds every
    phase of every rank (ccogen.rt.watchdog): an epoch's kernels, each host barrier, the
    heap, the module's registration, the teardown; `init_timeout_s` bounds the engine's
    bootstrap (default: the watchdog).
    `placement` puts the ranks on GPUs (default: `ccogen.rt.placement.place`, one GPU per
    rank, or ranks sharing GPUs under MPS on nvshmem); the kernels' residency is checked
    against it before anything launches (placement.ResidencyError).
    """
    if iters < 1:
        raise RunError("iters must be at least 1")
    if init_timeout_s is None:
        init_timeout_s = watchdog_s
    manifest = load_manifest(manifest_dir)
    if instance is not None:
        _check_instance(manifest, instance)
    drawn = DrawSpec.of(instance, seed) if instance is not None else None
    if manifest.runtime_values and drawn is None:
        raise RunError(f"`{manifest.protocol}` reads run-time values: its inputs must satisfy "
                       "its `require`, and random bytes would not; run it with its instance "
                       "(`ccogen run FILE.cco`, `ccogen.rt.run`), which draws contents that do")
    specs: tuple[CheckSpec, ...] = ()  # run-time values: per epoch, from the drawn contents
    if drawn is None:
        specs = tuple(checks) if checks is not None else tuple(_instance_checks(instance))
    distributed = _distributed_env()
    if distributed is None:
        placement = placement or place(manifest.nranks, manifest.target)
        arch = device_arch(placement.devices[0])
    else:
        arch = device_arch(distributed[2])
    cubin, engine, library = _build(manifest, arch, debug)
    if distributed is not None:
        check_residency(manifest, cubin, Placement((distributed[2],), 0))
        return _run_distributed(manifest, specs, iters, seed, debug, watchdog_s, cubin, engine,
                                library, distributed, drawn)
    assert placement is not None
    check_residency(manifest, cubin, placement)
    with tempfile.TemporaryDirectory(prefix="ccogen-run-") as shared:
        if drawn is not None:
            precompute(drawn, iters, Path(shared) / "draws")
        config = RunConfig(str(manifest.directory), manifest.nranks, iters, seed,
                           debug or manifest.debug, str(cubin), str(engine), specs,
                           rendezvous_dir=shared, shared_dir=shared, watchdog_s=watchdog_s,
                           init_timeout_s=init_timeout_s, devices=placement.devices,
                           drawn=drawn, drawn_dir=str(Path(shared) / "draws"))
        results = spawn_ranks(config)
    return RunReport(manifest.protocol, manifest.target, manifest.nranks, iters, results,
                     library=library, placement=placement.describe())


def _instance_checks(instance: Instance | None) -> list[CheckSpec]:
    """Every `ensure` comparison of a protocol without run-time values: evaluated from the
    protocol (ccogen.rt.prepare: `instance` may be the checked instance, which holds the
    comparisons of sampled loops only), or the unrolled instance's (the oracle)."""
    from ccogen.rt.prepare import checks_for, unrolled

    if instance is None or unrolled():
        return instance_checks(instance)
    params = (*instance.params, *((k, v.value) for k, v in instance.dtype_params))
    return checks_for(instance.protocol, instance.nranks, dict(params))


def buffer_layout(manifest: Manifest) -> tuple[dict[str, int], int]:
    """Where `ccogen run` keeps the local buffers (language v2): after the heap, in the same
    device allocation, each 256-byte aligned (offsets from the heap's start), and the
    allocation's size.  The kernels take them as plain device pointers (`buffer:NAME`);
    nothing reaches them through the engine (docs/runtime.md, "Buffers")."""
    offsets: dict[str, int] = {}
    end = manifest.heap_size
    for b in manifest.buffers:
        start = -(-end // HEAP_ALIGN) * HEAP_ALIGN
        offsets[b.name] = start
        end = start + b.size
    return offsets, end


def _check_instance(manifest: Manifest, instance: Instance) -> None:
    if manifest.nranks != instance.nranks:
        raise ManifestError(f"{manifest.directory}/manifest.json is for {manifest.nranks} "
                            f"ranks, the instance has {instance.nranks}")
    expected = dict(instance.window_sizes)
    found = {w.name: w.size for w in manifest.windows}
    if found != expected:
        raise ManifestError(f"{manifest.directory}/manifest.json windows {found} do not match "
                            f"the instance's {expected}")
    expected = dict(instance.buffer_sizes)
    found = {b.name: b.size for b in manifest.buffers}
    if found != expected:
        raise ManifestError(f"{manifest.directory}/manifest.json buffers {found} do not match "
                            f"the instance's {expected}")


def device_arch(ordinal: int) -> str:
    """`sm_XY` of a device (the cubin and the shims are built for it)."""
    try:
        major, minor = native.compute_capability(ordinal)
    except native.GpuUnavailable as exc:
        raise NoGpuError(f"no NVIDIA GPU found: {exc}") from None
    return f"sm_{major}{minor}"


def _build(manifest: Manifest, arch: str, debug: bool) -> tuple[Path, Path, str]:
    from ccogen.rt.engines import build_engine
    from ccogen.toolchains.cubin import build_cubin

    with _still(f"building the kernels of `{manifest.protocol}` for {arch} (nvcc; cached "
                "after the first build)"):
        cubin = build_cubin(manifest.directory, manifest.target, arch,
                            debug or manifest.debug)
        engine, library = build_engine(manifest.target, arch)
    return cubin, engine, library.describe()


@contextlib.contextmanager
def _still(what: str, every_s: float = BUILD_NOTICE_S) -> Iterator[None]:
    """Say on stderr, every `every_s` seconds, that `what` is still going on (a build is
    bounded by the compiler's own limit, toolchains.cubin, not by the watchdog: it makes progress
    and waits on no one; docs/runtime.md, "Watchdog")."""
    start = time.monotonic()
    stop = threading.Event()

    def tell() -> None:
        while not stop.wait(every_s):
            _notice(f"still {what}: {time.monotonic() - start:.0f} s")

    thread = threading.Thread(target=tell, name="ccogen: build notice", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()


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
                     where: tuple[int, int, int], drawn: DrawSpec | None = None) -> RunReport:
    from ccogen.rt.rendezvous import FileRendezvous, from_environment, job_dirs

    rank, world, local = where
    if world != manifest.nranks:
        raise RunError(f"protocol instance has {manifest.nranks} ranks, the job has "
                       f"WORLD_SIZE={world}")
    rendezvous = from_environment(rank, manifest.protocol)
    shared = job_dirs(manifest.protocol)[1]  # private to the user, checked (rt/rendezvous)
    directory = rendezvous.directory if isinstance(rendezvous, FileRendezvous) else shared
    config = RunConfig(str(manifest.directory), manifest.nranks, iters, seed,
                       debug or manifest.debug, str(cubin), str(engine), specs,
                       rendezvous_dir=str(directory), shared_dir=str(shared),
                       watchdog_s=watchdog_s, init_timeout_s=watchdog_s, drawn=drawn)
    def on_hang(result: RankResult) -> None:
        report = RunReport(manifest.protocol, manifest.target, manifest.nranks, iters, [result],
                           library=library, partial=True)
        sys.stderr.write(report.format() + "\n")
        sys.stderr.flush()
        os._exit(1)

    result = run_rank(config, rank, local, rendezvous, on_hang)
    return RunReport(manifest.protocol, manifest.target, manifest.nranks, iters, [result],
                     library=library, partial=True)


def spawn_ranks(config: Any, main: Callable[..., None] | None = None,
           failed: Callable[[int, str], Any] | None = None,
           deadline_s: float | None = None, margin_s: float = STALL_MARGIN_S) -> list[Any]:
    """One process per rank; wait for every report; stop the rest once one rank failed.

    `main(config, rank, results_queue)` is the rank's entry point (`_worker_main`), each
    report has `.rank` and `.ok`, and `failed(rank, text)` makes the report of a rank
    that never sent one; `deadline_s` bounds the whole run (default: from `iters`).
    `config` needs `nranks`, `watchdog_s`, `init_timeout_s` and `shared_dir`.

    A rank that stays in one phase past its limit (ccogen.rt.watchdog: the watchdog unless
    the phase names another, plus a margin) has stalled: the run stops, naming the rank and
    the phase, and so does it, after a grace of the watchdog, when a rank failed.  Both are
    said on stderr as they happen (the report comes when every rank is accounted for).
    """
    main = main or _worker_main
    failed = failed or (lambda rank, text: RankResult(rank, rank, error=text))
    started = time.time()
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
                    _notice(f"rank {got.rank} failed; stopping the other ranks within "
                            f"{grace:g} s")
                continue
            except queue_module.Empty:
                pass
            for rank, p in enumerate(procs):
                if rank in results or not p.is_alive():
                    continue
                stall = stalled(read_phase(phase_file(config.shared_dir, rank)), started,
                                config.watchdog_s, margin_s)
                if stall is not None:
                    text, age, bound = stall
                    where = _where_stuck(config, rank, p)
                    results[rank] = failed(rank, (
                        f"rank {rank} stalled: {age:.0f} s in `{text}`, past its limit of "
                        f"{bound:g} s; {where}"))
                    _notice(f"rank {rank} stalled in `{text}` ({age:.0f} s); stopping the run")
                    first_failure = first_failure or time.monotonic() - grace
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


def _notice(text: str) -> None:
    """A line on stderr while the run goes on (`ccogen run` prints its report at the end)."""
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"ccogen: {text}\n")
        sys.stderr.flush()


def _where_stuck(config: Any, rank: int, proc: Any) -> str:
    """The phase a rank that did not report was in, and its Python stack (SIGUSR1 makes
    the worker's faulthandler write it; see session.dump_stack_on_signal)."""
    recorded = read_phase(phase_file(config.shared_dir, rank))
    phase = recorded.text if recorded is not None else "starting"
    since = f" (for {time.time() - recorded.since:.0f} s)" if recorded is not None else ""
    text = f"rank {rank} was at: {phase}{since}"
    if proc.is_alive() and proc.pid is not None:
        try:
            os.kill(proc.pid, signal.SIGUSR1)
            time.sleep(0.5)
        except OSError:
            return text
        stack = _read_text(stack_file(config.shared_dir, rank))
        if stack:
            lines = [ln for ln in stack.splitlines() if ln.strip()][:12]  # innermost first
            text += "\n      " + "\n      ".join(lines)
    return text


def _read_text(path: Path) -> str:
    from ccogen.rt.rendezvous import read_private

    try:
        return read_private(path).decode("utf-8", errors="replace").strip()
    except OSError:
        return ""


def _worker_main(config: RunConfig, rank: int, results_queue: Any) -> None:
    """Entry point of a spawned rank: run, report, and leave without interpreter teardown
    (after a trapped kernel the context is broken and library exit handlers could hang)."""
    from ccogen.rt.rendezvous import FileRendezvous

    dump_stack_on_signal(config.shared_dir, rank)

    def report(result: RankResult) -> None:
        results_queue.put(result)
        results_queue.close()
        results_queue.join_thread()
        os._exit(0)

    device = config.devices[rank] if config.devices else rank
    report(run_rank(config, rank, device, FileRendezvous(Path(config.rendezvous_dir)), report))


# ============================================================================ one rank


def run_rank(config: RunConfig, rank: int, device: int, rendezvous: Any,
             on_hang: Callable[[RankResult], None]) -> RankResult:
    """Run every epoch on this rank; never raises (problems are in the result).

    `on_hang(result)` is called from a watchdog thread when a driver call itself does not
    return within the watchdog (the main thread is then stuck): it must report and exit.
    """
    result = RankResult(rank, device)
    state = RankRunner(config, rank, device, rendezvous, result, on_hang)
    try:
        state.run()
    except Stop:
        pass
    except Exception as exc:
        result.error = failure_text(exc)
    if not result.ok:
        abandon(state)
    return result


class RankRunner:
    """One rank of `ccogen run`: its session, the instance's module and its epochs."""

    def __init__(self, config: RunConfig, rank: int, device: int, rendezvous: Any,
                 result: RankResult, on_hang: Callable[[RankResult], None]) -> None:
        self.config = config
        self.on_hang = on_hang
        self.rank = rank
        self.device = device
        self.result = result
        self.manifest = load_manifest(config.manifest_dir)
        self.checks = [c for c in config.checks if c.rank == rank]
        self.exports = {w for (w, r) in remote_finals(config.checks) if r == rank}
        self.imports = {(w, r) for (w, r) in remote_finals(self.checks)}
        self.exchanges = False  # run-time protocols: some rank's checks read another's finals
        result.checks_per_epoch = len(self.checks)
        self.buffers: dict[str, int] = {}  # device address of each local buffer (`run`)
        self.session = RankSession(
            target=self.manifest.target, engine_path=config.engine, rank=rank,
            nranks=config.nranks, device=device, rendezvous=rendezvous,
            shared_dir=config.shared_dir, init_timeout_s=config.init_timeout_s)

    def attach(self, session: RankSession) -> None:
        """Use a session opened elsewhere (`ccogen.bench` runs many instances on one engine
        and heap, and checks one epoch of each through `epoch`)."""
        self.session = session
        self.start, self.end = session.rt.Event(), session.rt.Event()
        self.after = [session.rt.Event() for _ in self.manifest.kernels]

    # -- set-up ------------------------------------------------------------------------------
    def run(self) -> None:
        s, m = self.session, self.manifest
        s.open_context()
        # the target's engine environment and heap alignment (before the engine starts)
        s.requirements = read_requirements(self.config.manifest_dir, m.target)
        devcomm = any("devcomm" in k.params for k in m.kernels)
        offsets, size = buffer_layout(m)
        s.open_engine(size, m.lsa_barrier_count if devcomm else None, self.result)
        rt, engine = s.rt, s.engine
        self.buffers = {name: s.heap.pointer + off for name, off in offsets.items()}
        s.phase("module load")
        self.module = module = rt.Module(Path(self.config.cubin).read_bytes())
        engine.module_init(module.handle)
        self.functions = functions = [module.function(k.symbol) for k in m.kernels]
        self.record = record = rt.HostMapped(RECORD_SIZE) if self.config.debug else None
        self.start, self.end = rt.Event(), rt.Event()
        self.after = [rt.Event() for _ in m.kernels]  # which kernel had not finished
        for epoch in range(self.config.iters):
            self.epoch(epoch, functions, record)
        s.phase("teardown")
        s.stream.synchronize()
        engine.module_finalize(module.handle)
        module.unload()
        s.close()
        s.phase("done")

    # -- one epoch ---------------------------------------------------------------------------
    def epoch(self, epoch: int, functions: list[Any], record: Any) -> None:
        """One checked epoch of the instance on the session's engine, heap and stream."""
        s, m, watchdog = self.session, self.manifest, self.config.watchdog_s
        rt, stream = s.rt, s.stream
        s.phase(f"epoch {epoch}: filling windows")
        drawn = self._draw(epoch)
        for w in m.windows:
            data = self._initial(drawn, epoch, w.name, w.size, w.dtype)
            rt.memcpy_htod(s.heap.pointer + w.offset, data)
        for b in m.buffers:
            data = self._initial(drawn, epoch, b.name, b.size, b.dtype)
            rt.memcpy_htod(self.buffers[b.name], data)
        s.ctx.synchronize()  # pageable copies complete before any peer may read them
        self._barrier("before the kernels", epoch)
        done = False
        s.phase(f"epoch {epoch}: kernels")
        backstop = self._arm_backstop(epoch, record)
        try:
            self.start.record(stream)
            for spec, fn, after in zip(m.kernels, functions, self.after, strict=True):
                rt.launch(fn, spec.grid, spec.block, spec.shared_mem,
                          s.kernel_params(spec, epoch, record, self.buffers), stream,
                          spec.cooperative)
                after.record(stream)
            self.end.record(stream)
            done = stream.wait(watchdog)
        except (rt.CudaError, rt.CudaUnavailable) as exc:
            backstop.cancel()
            self._kernel_failed(epoch, record, str(exc))
        backstop.cancel()
        if not done:
            self._kernel_failed(epoch, record, None)
        self.result.times_ms.append(self.end.elapsed_ms_since(self.start))
        self._barrier("after the kernels", epoch)
        s.phase(f"epoch {epoch}: checking")
        finals = self._finals()
        if (self.exports or self.imports) if drawn is None else self.exchanges:
            self._exchange(epoch, finals)
        sizes = {w.name: w.size for w in m.windows} | {b.name: b.size for b in m.buffers}
        dtypes = {w.name: w.dtype for w in m.windows} | {b.name: b.dtype for b in m.buffers}
        initial = None if drawn is None else \
            {(name, rank): data for (rank, name), data in drawn.arrays.items()}
        failures = evaluate(self.checks,
                            make_reader(self.config.seed, epoch, sizes, finals, dtypes, initial),
                            epoch)
        self.result.failure_count += len(failures)
        room = MAX_REPORTED_FAILURES - len(self.result.failures)
        self.result.failures.extend(failures[:max(0, room)])
        self.result.epochs = epoch + 1

    def _draw(self, epoch: int) -> EpochDraw | None:
        """A run-time protocol's contents and checks for `epoch` (ccogen.rt.drawn); the
        exchange of final windows is decided over every rank's checks, so that every rank
        meets at its barriers."""
        if self.config.drawn is None:
            return None
        try:
            drawn = load_epoch(self.config.drawn, epoch, self.config.drawn_dir, self.rank)
        except RunError as exc:
            self.result.error = f"rank {self.rank}: {exc}"
            raise Stop from None
        self.checks = [c for c in drawn.checks if c.rank == self.rank]
        remote = remote_finals(drawn.checks)
        self.exports = {w for (w, r) in remote if r == self.rank}
        self.imports = remote_finals(self.checks)
        self.exchanges = bool(remote)
        self.result.checks_per_epoch = max(self.result.checks_per_epoch, len(self.checks))
        self.result.draws.append(drawn.label)
        return drawn

    def _initial(self, drawn: EpochDraw | None, epoch: int, name: str, size: int,
                 dtype: str) -> Any:
        if drawn is None:
            return initial_bytes(self.config.seed, epoch, self.rank, name, size, dtype)
        return drawn.arrays[(self.rank, name)]

    def _barrier(self, when: str, epoch: int) -> None:
        self.session.phase(f"epoch {epoch}: host barrier {when}")
        try:
            self.session.engine.barrier(self.config.watchdog_s)
        except EngineError as exc:
            self.result.error = f"rank {self.rank}, epoch {epoch}, {when}: {exc}"
            raise Stop from None

    def _arm_backstop(self, epoch: int, record: Any) -> threading.Timer:
        """Reports the hang from another thread if the main thread's driver calls do not
        come back (the stream watchdog needs cuStreamQuery to return)."""
        def fire() -> None:
            with contextlib.suppress(Stop):
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
                raise Stop
        if error is None:
            hint = ("; no wait reported its timeout" if self.config.debug else
                    "; rerun with --debug to name the wait that hangs")
            kernel = self._unfinished()
            self.result.unfinished = kernel
            what = "the kernels" if kernel is None else f"kernel `{kernel}`"
            self.result.error = (f"rank {self.rank}, epoch {epoch}: {what} did not finish "
                                 f"within {self.config.watchdog_s:g} s{hint}")
        else:
            self.result.error = f"rank {self.rank}, epoch {epoch}: {error}"
        raise Stop

    def _unfinished(self) -> str | None:
        """The first kernel of the epoch whose completion event has not fired (None when
        that cannot be told: an extension without `Event.query`, or a failing query)."""
        for spec, after in zip(self.manifest.kernels, getattr(self, "after", []), strict=False):
            try:
                if not after.query():
                    return spec.name
            except Exception:
                return None
        return None

    def _finals(self) -> dict[tuple[str, int], Any]:
        import numpy as np

        s = self.session
        out = {(w.name, self.rank): np.frombuffer(
                   s.rt.memcpy_dtoh(s.heap.pointer + w.offset, w.size), dtype=np.uint8)
               for w in self.manifest.windows}
        for b in self.manifest.buffers:
            out[(b.name, self.rank)] = np.frombuffer(
                s.rt.memcpy_dtoh(self.buffers[b.name], b.size), dtype=np.uint8)
        return out

    def _exchange(self, epoch: int, finals: dict[tuple[str, int], Any]) -> None:
        """Final windows that other ranks' checks read, through the shared directory."""
        import numpy as np

        from ccogen.rt.rendezvous import read_private, write_private

        shared = Path(self.config.shared_dir)
        shared.mkdir(parents=True, exist_ok=True)
        mine = []
        for w in sorted(self.exports):  # never through a link (rt/rendezvous)
            path = shared / f"final-{epoch}-{self.rank}-{w}.bin"
            write_private(path, finals[(w, self.rank)].tobytes())
            mine.append(path)
        self._barrier("exporting final windows", epoch)
        for w, r in self.imports:
            data = read_private(shared / f"final-{epoch}-{r}-{w}.bin")
            finals[(w, r)] = np.frombuffer(data, dtype=np.uint8)
        self._barrier("importing final windows", epoch)
        for path in mine:
            path.unlink(missing_ok=True)


__all__ = ["DEFAULT_WATCHDOG_S", "RankRunner", "RunConfig", "buffer_layout", "device_arch", "run",
           "run_rank", "spawn_ranks"]
