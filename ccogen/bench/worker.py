"""One rank of a benchmark run: one process per GPU, spawned by ccogen.bench.runner.

The rank sets up its engine once (bootstrap, ONE symmetric heap as large as the largest
case's, the device communicator) and then runs every case in order, all ranks in step:

1. zero the whole heap (signals, counters, launch counters start at 0), host barrier;
2. load the case's cubin (registered with the engine where it wants it: nvshmem's
   `nvshmemx_cumodule_init`);
3. one verified epoch: exactly `ccogen run`'s epoch (fill every window with the seeded
   bytes, host barrier, the kernels, host barrier, check every `ensure` of this rank;
   `ccogen.rt.launch._Rank._epoch`).  The ranks agree (through the shared directory)
   whether every rank's checks held; a case that failed anywhere is not timed;
4. timing: `warmup` samples, host barrier, then `samples` samples back to back, a CUDA
   event between consecutive samples and nothing else on the host: no barrier, no
   refill, no check.  A sample is `epochs_per_sample` epochs: launched one by one, or
   (`Timing.graph`, kernels that count their own epochs) one replay of a CUDA graph that
   captured that many epochs' launches.  Time per epoch = event interval / epochs;
5. optionally one more verified epoch (the timed epochs left the protocol's signal
   counts where the next epoch expects them, so this checks the timed configuration);
6. unload the module.

Then the engine is finalized and, when asked, the engine's own collectives are timed
through torch.distributed in the same processes (ccogen.bench.collective).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ccogen.bench.cases import CaseSpec, CaseTimes, RankBench, WorkerConfig
from ccogen.rt import native
from ccogen.rt.errors import EngineError, RunError
from ccogen.rt.launch import RunConfig, _Rank, _Stop
from ccogen.rt.manifest import Manifest, load_manifest
from ccogen.rt.report import RankResult
from ccogen.rt.toolchain import engine_spec


def worker_main(config: WorkerConfig, rank: int, results_queue: Any) -> None:
    """Entry point of a spawned rank (device = rank): run, report, leave without teardown."""
    import faulthandler

    from ccogen.rt.rendezvous import FileRendezvous

    for key, value in config.env:
        os.environ.setdefault(key, value)
    _memoize_window_data()
    Path(config.shared_dir).mkdir(parents=True, exist_ok=True)
    stack_file = open(Path(config.shared_dir) / f"rank{rank}.stack", "w")  # noqa: SIM115
    faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=True)

    def report(result: Any) -> None:
        if isinstance(result, RankResult):  # from a verified epoch's backstop thread
            result = RankBench(rank, error=result.error or result.wait or "a rank hung")
        results_queue.put(result)
        results_queue.close()
        results_queue.join_thread()
        os._exit(0)

    rendezvous = FileRendezvous(Path(config.rendezvous_dir))
    report(run_bench_rank(config, rank, rank, rendezvous, report))


def _memoize_window_data(entries: int = 8) -> None:
    """Generated and reference kernels of one size are verified in the same epochs, so
    they fill (and check against) the same seeded window bytes: generate them once.
    Only in the spawned benchmark process (generating 512 MiB takes seconds)."""
    import functools

    from ccogen.rt import data, launch

    cached = functools.lru_cache(maxsize=entries)(data.initial_bytes)
    data.initial_bytes = cached  # type: ignore[assignment]
    launch.initial_bytes = cached  # type: ignore[assignment]


def run_bench_rank(config: WorkerConfig, rank: int, device: int, rendezvous: Any,
                   on_hang: Callable[[Any], None]) -> RankBench:
    """Every case and collective of this rank; never raises (problems are in the result)."""
    result = RankBench(rank)
    bench = BenchRank(config, rank, device, rendezvous, result, on_hang)
    try:
        bench.run()
    except _Stop:
        pass
    except RunError as exc:
        result.error = str(exc)
    except Exception as exc:
        if native.is_cuda_error(exc):
            result.error = f"rank {rank}: {exc}"
        else:
            import traceback

            result.error = f"internal error: {exc!r}\n{traceback.format_exc()}"
    if result.error is not None:
        _ABANDONED.append(bench)  # never free driver objects after a failure (see launch.py)
    return result


_ABANDONED: list[Any] = []


class BenchRank:
    """One rank's engine, heap and stream, shared by every case."""

    def __init__(self, config: WorkerConfig, rank: int, device: int, rendezvous: Any,
                 result: RankBench, on_hang: Callable[[Any], None]) -> None:
        self.config = config
        self.rank = rank
        self.device = device
        self.rendezvous = rendezvous
        self.result = result
        self.on_hang = on_hang
        self.events: list[Any] = []

    # -- set-up and teardown -----------------------------------------------------------------
    def run(self) -> None:
        self.rt = rt = native.load()
        self._phase("CUDA context")
        self.ctx = rt.Context(self.device)
        self.result.device = _device_name(rt, self.device)
        self.engine = self._engine()
        self.result.library = self.engine.library.describe()
        self._phase("heap allocation")
        self.heap = self.engine.heap_alloc(self.config.heap_size)
        self._zero_heap()
        self.engine.barrier(self.config.init_timeout_s)
        self.devcomm = b""
        if engine_spec(self.config.target).devcomm:
            self._phase("device communicator")
            self.devcomm = self.engine.devcomm(self.config.lsa_barrier_count)
        self.stream = rt.Stream(True)
        for index, case in enumerate(self.config.cases):
            self.result.cases.append(self.case(index, case))
        self._phase("teardown")
        self.stream.synchronize()
        self.engine.finalize()
        if self.config.compares:
            from ccogen.bench.collective import run_collectives

            self._phase("engine collectives (torch.distributed)")
            self.result.cases.extend(run_collectives(
                self.config.compares, self.rank, self.config.nranks, self.device,
                Path(self.config.shared_dir), self.config.init_timeout_s))
        self._phase("done")

    def _phase(self, what: str) -> None:
        with contextlib.suppress(OSError):
            (Path(self.config.shared_dir) / f"rank{self.rank}.phase").write_text(what)

    def _engine(self) -> Any:
        from ccogen.rt.engines import Engine
        from ccogen.rt.toolchain import find_library

        heap = engine_spec(self.config.target).heap
        for key, value in heap.environment(self.config.heap_size).items():
            os.environ.setdefault(key, value)
        engine = Engine(self.config.target, Path(self.config.engine),
                        find_library(self.config.target))
        self._phase(f"{self.config.target} engine bootstrap")
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

    def _zero_heap(self) -> None:
        self.rt.memset_d8(self.heap.pointer, 0, self.config.heap_size)
        self.ctx.synchronize()

    def _barrier(self, what: str) -> None:
        self._phase(f"host barrier: {what}")
        try:
            self.engine.barrier(self.config.watchdog_s)
        except EngineError as exc:
            self.result.error = f"rank {self.rank}, {what}: {exc}"
            raise _Stop from None

    def _agree(self, index: int, what: str, value: bool) -> bool:
        """True when `value` is true on every rank (files in the shared directory)."""
        shared = Path(self.config.shared_dir)
        name = f"agree-{index}-{what}"
        mine = shared / f"{name}-{self.rank}"
        tmp = mine.with_suffix(".tmp")
        tmp.write_text("1" if value else "0")
        os.replace(tmp, mine)
        self._barrier(f"case {index}: agreeing on {what}")
        votes = [(shared / f"{name}-{r}").read_text() for r in range(self.config.nranks)]
        self._barrier(f"case {index}: agreed on {what}")
        mine.unlink(missing_ok=True)
        return all(v == "1" for v in votes)

    def _events(self, count: int) -> list[Any]:
        while len(self.events) < count:
            self.events.append(self.rt.Event())
        return self.events[:count]

    # -- one case ----------------------------------------------------------------------------
    def case(self, index: int, case: CaseSpec) -> CaseTimes:
        """Verify, time and verify again one case (module docstring)."""
        rt = self.rt
        times = CaseTimes(case.key)
        self._phase(f"{case.key}: set-up")
        self._zero_heap()
        self._barrier(f"{case.key}: heap zeroed")
        manifest = load_manifest(case.manifest_dir)
        module = rt.Module(Path(case.cubin).read_bytes())
        if case.module_init:
            self.engine.module_init(module.handle)
        functions = [module.function(k.symbol) for k in manifest.kernels]
        checker = self._checker(case)
        # A hang or a failed launch raises _Stop out of here: the process then reports
        # and exits without touching the module again.
        epoch = self._verify(checker, functions, 0, times, "before timing")
        if self._agree(index, "verified", times.verified is True):
            epoch = self._time(case, manifest, functions, checker, epoch, times)
            if case.verify_after:
                epoch = self._verify(checker, functions, epoch, times, "after timing")
                times.verified = self._agree(index, "verified-after", times.verified is True)
        else:
            times.verified = False
            times.note = (times.note + "; " if times.note else "") + \
                "not timed: an ensure failed on some rank"
        self.stream.synchronize()
        if case.module_init:
            self.engine.module_finalize(module.handle)
        module.unload()
        return times

    def _checker(self, case: CaseSpec) -> _Rank:
        """`ccogen run`'s per-rank state for this case, on this rank's context and stream."""
        config = RunConfig(case.manifest_dir, self.config.nranks, 1, self.config.seed, False,
                           case.cubin, self.config.engine, case.checks,
                           rendezvous_dir=self.config.rendezvous_dir,
                           shared_dir=self.config.shared_dir, watchdog_s=self.config.watchdog_s)
        state = _Rank(config, self.rank, self.device, self.rendezvous,
                      RankResult(self.rank, self.device), self.on_hang)
        state.attach(self.rt, self.ctx, self.stream)
        return state

    def _verify(self, checker: _Rank, functions: list[Any], epoch: int, times: CaseTimes,
                when: str) -> int:
        """One checked epoch (`ccogen run`'s); returns the next epoch index."""
        before = checker.result.failure_count
        try:
            checker._epoch(epoch, self.engine, self.heap, self.devcomm, functions, None)
        except _Stop:
            self.result.error = checker.result.error or checker.result.wait or \
                f"rank {self.rank}: {times.key}: the verified epoch stopped"
            raise
        failed = checker.result.failure_count - before
        if failed:
            times.failures += [f.format() for f in checker.result.failures[-failed:]][:4]
            times.note = (times.note + "; " if times.note else "") + \
                f"{failed} ensure comparison(s) failed {when} on rank {self.rank}"
        times.verified = (times.verified is not False) and failed == 0
        return epoch + 1

    def _launch(self, manifest: Manifest, functions: list[Any], checker: _Rank,
                epoch: int) -> None:
        """Every kernel of one epoch, in manifest order, on this rank's stream."""
        for spec, fn in zip(manifest.kernels, functions, strict=True):
            self.rt.launch(fn, spec.grid, spec.block, spec.shared_mem,
                           checker._params(spec, epoch, self.devcomm, self.heap, None),
                           self.stream, spec.cooperative)

    def _capture(self, issue: Callable[[], None]) -> tuple[Any | None, str]:
        """(graph, "") from the launches `issue` makes, or (None, why) when the driver
        refuses to capture them (they then run without a graph)."""
        rt = self.rt
        try:
            rt.begin_capture(self.stream)
        except rt.CudaError as exc:
            return None, f"no CUDA graph ({exc}); timed without one"
        try:
            issue()
        except rt.CudaError as exc:
            with contextlib.suppress(rt.CudaError):
                rt.end_capture(self.stream)
            return None, f"no CUDA graph ({exc}); timed without one"
        try:
            return rt.end_capture(self.stream), ""
        except rt.CudaError as exc:
            return None, f"no CUDA graph ({exc}); timed without one"

    def _time(self, case: CaseSpec, manifest: Manifest, functions: list[Any], checker: _Rank,
              epoch: int, times: CaseTimes) -> int:
        """The timed phase; returns the next epoch index (see the module docstring)."""
        t = case.timing
        per = t.epochs_per_sample
        graph = None
        if t.graph and case.device_epoch:
            def issue() -> None:
                for i in range(per):
                    self._launch(manifest, functions, checker, epoch + i)

            graph, note = self._capture(issue)
            if note:
                times.note = note
        next_epoch = [epoch]

        def sample() -> None:
            if graph is not None:
                graph.launch(self.stream)
            else:
                for i in range(per):
                    self._launch(manifest, functions, checker, next_epoch[0] + i)
            next_epoch[0] += per

        times.mode = "graph" if graph is not None else "stream"
        self._phase(f"{case.key}: warm-up")
        for _ in range(t.warmup):
            sample()
        self._wait(case, "warm-up")
        self._barrier(f"{case.key}: before the timed samples")
        timer = self._read_timer(case)
        events = self._events(t.samples + 1)
        self._phase(f"{case.key}: timed samples")
        events[0].record(self.stream)
        for i in range(t.samples):
            sample()
            events[i + 1].record(self.stream)
        self._wait(case, "timed samples")
        times.times_us = [events[i + 1].elapsed_ms_since(events[i]) * 1e3 / per
                          for i in range(t.samples)]
        if timer is not None:
            after = self._read_timer(case)
            assert after is not None
            trips = after[1] - timer[1]
            if trips > 0:
                times.in_kernel_us = (after[0] - timer[0]) / trips / 1e3
        graph = None  # the graph's launches reference the module: release it before unload
        # A peer may still be in its last timed epoch (storing into this rank's windows):
        # nothing refills or zeroes the heap before every rank is done.
        self._barrier(f"{case.key}: after the timed samples")
        return next_epoch[0]

    def _wait(self, case: CaseSpec, what: str) -> None:
        if not self.stream.wait(self.config.watchdog_s):
            self.result.error = (f"rank {self.rank}: {case.key}: the {what} did not finish "
                                 f"within {self.config.watchdog_s:g} s")
            raise _Stop

    def _read_timer(self, case: CaseSpec) -> tuple[int, int] | None:
        """(sum of ns, one-way trips) a timing reference accumulated, on its timer rank."""
        if case.timer_offset is None or self.rank != case.timer_rank:
            return None
        data = self.rt.memcpy_dtoh(self.heap.pointer + case.timer_offset, 16)
        return int.from_bytes(data[:8], "little"), int.from_bytes(data[8:], "little")


def _device_name(rt: Any, device: int) -> str:
    try:
        return str(rt.device_name(device)) if hasattr(rt, "device_name") else ""
    except Exception:
        return ""


__all__ = ["BenchRank", "run_bench_rank", "worker_main"]
