"""One rank of a benchmark run: one process per GPU, spawned by ccogen.bench.runner.

The rank opens its session once (ccogen.rt.session, as `ccogen run` does: bootstrap, ONE
symmetric heap as large as the largest case's, the device communicator) and then runs
every case in order, all ranks in step:

1. zero the whole heap (signals, counters, launch counters start at 0; a language-v2
   case's local buffers lie after its heap in the same allocation, as in `ccogen run`:
   `ccogen.rt.launch.buffer_layout`), host barrier;
2. load the case's cubin (registered with the engine where it wants it: nvshmem's
   `nvshmemx_cumodule_init`);
3. one verified epoch: exactly `ccogen run`'s epoch (fill every window with the seeded
   bytes, host barrier, the kernels, host barrier, check every `ensure` of this rank;
   `ccogen.rt.launch.RankRunner.epoch`).  A protocol with run-time values fills its windows
   and buffers with the case's drawn contents instead (`CaseSpec.drawn`, staged in the
   shared directory as this epoch's draw) and checks the `ensure` of their instance.
   The ranks agree (through the shared directory) whether every rank's checks held; a
   case that failed anywhere is not timed, nor one whose launches would leave contents
   that violate `require` for the next (`CaseSpec.untimed`, ccogen.bench.contents);
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ccogen.bench.cases import CaseSpec, CaseTimes, RankBench, WorkerConfig
from ccogen.errors import EngineError
from ccogen.manifest import Manifest, load_manifest
from ccogen.rt.launch import RankRunner, RunConfig, buffer_layout
from ccogen.rt.report import RankResult
from ccogen.rt.session import RankSession, Stop, abandon, dump_stack_on_signal, failure_text
from ccogen.toolchains.libraries import engine_spec

# The timed epochs run back to back, as a loop or a CUDA graph calls a protocol; a manifest
# that says `host_sync` (a hand-written reference, a protocol that declares it) was not
# proven safe that way, and its row says so.
HOST_SYNC_NOTE = ("timed back to back, without the host barrier between launches that its "
                  "manifest asks for (`between_launches: host_sync`)")


def worker_main(config: WorkerConfig, rank: int, results_queue: Any) -> None:
    """Entry point of a spawned rank (its device from the placement, else its rank): run,
    report, leave without teardown."""
    from ccogen.rt.rendezvous import FileRendezvous

    for key, value in config.env:
        os.environ.setdefault(key, value)
    _memoize_window_data()
    dump_stack_on_signal(config.shared_dir, rank)

    def report(result: Any) -> None:
        if isinstance(result, RankResult):  # from a verified epoch's backstop thread
            result = RankBench(rank, error=result.error or result.wait or "a rank hung")
        results_queue.put(result)
        results_queue.close()
        results_queue.join_thread()
        os._exit(0)

    rendezvous = FileRendezvous(Path(config.rendezvous_dir))
    device = config.devices[rank] if config.devices else rank
    report(run_bench_rank(config, rank, device, rendezvous, report))


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
    except Stop:
        pass
    except Exception as exc:
        result.error = failure_text(exc, cuda_prefix=f"rank {rank}: ")
    if result.error is not None:
        abandon(bench)
    return result


class BenchRank:
    """One rank of a benchmark: its session (engine, heap, stream) serves every case."""

    def __init__(self, config: WorkerConfig, rank: int, device: int, rendezvous: Any,
                 result: RankBench, on_hang: Callable[[Any], None]) -> None:
        self.config = config
        self.rank = rank
        self.device = device
        self.rendezvous = rendezvous
        self.result = result
        self.on_hang = on_hang
        self.events: list[Any] = []
        self.session = RankSession(
            target=config.target, engine_path=config.engine, rank=rank, nranks=config.nranks,
            device=device, rendezvous=rendezvous, shared_dir=config.shared_dir,
            init_timeout_s=config.init_timeout_s)

    # -- set-up and teardown -----------------------------------------------------------------
    def run(self) -> None:
        s = self.session
        s.open_context()
        self.result.device = _device_name(s.rt, self.device)
        devcomm = engine_spec(self.config.target).devcomm
        s.open_engine(self.config.heap_size, self.config.lsa_barrier_count if devcomm else None,
                      self.result)
        for index, case in enumerate(self.config.cases):
            self.result.cases.append(self.case(index, case))
        s.phase("teardown")
        s.close()
        if self.config.compares:
            from ccogen.bench.collective import run_collectives

            s.phase("engine collectives (torch.distributed)",
                    self.config.init_timeout_s + 60.0 * len(self.config.compares))
            self.result.cases.extend(run_collectives(
                self.config.compares, self.rank, self.config.nranks, self.device,
                Path(self.config.shared_dir), self.config.init_timeout_s))
        s.phase("done")

    def _barrier(self, what: str) -> None:
        self.session.phase(f"host barrier: {what}")
        try:
            self.session.engine.barrier(self.config.watchdog_s)
        except EngineError as exc:
            self.result.error = f"rank {self.rank}, {what}: {exc}"
            raise Stop from None

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
            self.events.append(self.session.rt.Event())
        return self.events[:count]

    # -- one case ----------------------------------------------------------------------------
    def case(self, index: int, case: CaseSpec) -> CaseTimes:
        """Verify, time and verify again one case (module docstring)."""
        rt = self.session.rt
        times = CaseTimes(case.key)
        manifest = load_manifest(case.manifest_dir)
        if manifest.runtime_values and case.drawn is None:  # never random counts
            times.verified = False
            times.note = (f"not run: {manifest.protocol} reads run-time values and the case "
                          "has no drawn contents (this is a bug in ccogen)")
            return times
        self.session.phase(f"{case.key}: set-up")
        self.session.zero_heap()
        self._barrier(f"{case.key}: heap zeroed")
        module = rt.Module(Path(case.cubin).read_bytes())
        if case.module_init:
            self.session.engine.module_init(module.handle)
        functions = [module.function(k.symbol) for k in manifest.kernels]
        checker = self._checker(case)
        # local buffers (language v2): after the case's heap, as `ccogen run` keeps them
        # (the session's allocation is sized for them: runner._run_ranks)
        offsets, _ = buffer_layout(manifest)
        checker.buffers = {name: self.session.heap.pointer + off
                           for name, off in offsets.items()}
        # A hang or a failed launch raises Stop out of here: the process then reports
        # and exits without touching the module again.
        epoch = self._verify(checker, case, functions, 0, times, "before timing")
        if case.untimed:  # the timed epochs would read contents that `require` forbids
            times.note = (times.note + "; " if times.note else "") + \
                f"not timed: {case.untimed}"
        elif self._agree(index, "verified", times.verified is True):
            epoch = self._time(case, manifest, functions, epoch, times, checker.buffers)
            if manifest.between_launches == "host_sync":  # timed as a loop calls it anyway
                times.note = (times.note + "; " if times.note else "") + \
                    HOST_SYNC_NOTE
            if case.verify_after:
                epoch = self._verify(checker, case, functions, epoch, times,
                                     "after timing")
                times.verified = self._agree(index, "verified-after", times.verified is True)
        else:
            times.verified = False
            times.note = (times.note + "; " if times.note else "") + \
                "not timed: an ensure failed on some rank"
        self.session.stream.synchronize()
        if case.module_init:
            self.session.engine.module_finalize(module.handle)
        module.unload()
        return times

    def _checker(self, case: CaseSpec) -> RankRunner:
        """`ccogen run`'s per-rank state for this case, on this rank's context and stream."""
        config = RunConfig(case.manifest_dir, self.config.nranks, 1, self.config.seed, False,
                           case.cubin, self.config.engine, case.checks,
                           rendezvous_dir=self.config.rendezvous_dir,
                           shared_dir=self.config.shared_dir, watchdog_s=self.config.watchdog_s,
                           drawn=case.drawn, drawn_dir=case.drawn_dir)
        state = RankRunner(config, self.rank, self.device, self.rendezvous,
                      RankResult(self.rank, self.device), self.on_hang)
        state.attach(self.session)
        return state

    def _verify(self, checker: RankRunner, case: CaseSpec, functions: list[Any], epoch: int,
                times: CaseTimes, when: str) -> int:
        """One checked epoch (`ccogen run`'s); returns the next epoch index."""
        before = checker.result.failure_count
        if case.drawn is not None:
            self._check_staged(case, epoch)
        try:
            checker.epoch(epoch, functions, None)
        except Stop:
            self.result.error = checker.result.error or checker.result.wait or \
                f"rank {self.rank}: {times.key}: the verified epoch stopped"
            raise
        failed = checker.result.failure_count - before
        if failed:
            times.failures += [f.format() for f in checker.result.failures[-failed:]][:4]
            times.note = (times.note + "; " if times.note else "") + \
                f"{failed} ensure comparison(s) failed {when} on rank {self.rank}"
        times.verified = (times.verified is not False) and failed == 0
        if case.drawn is not None:
            loaded = checker.result.draws[-1]
            if loaded != case.contents:
                raise RuntimeError(f"{times.key}: epoch {epoch} filled the draw {loaded}, not "
                                   f"the case's {case.contents} (this is a bug in ccogen)")
            times.contents = loaded
        return epoch + 1

    def _check_staged(self, case: CaseSpec, epoch: int) -> None:
        """The case's draw must be staged for `epoch`: `load_epoch` would otherwise draw
        `ccogen run`'s contents of that epoch, not the case's."""
        if not (Path(case.drawn_dir) / f"draw-{epoch}.pkl").is_file():
            raise RuntimeError(f"{case.key}: no staged draw for epoch {epoch} in "
                               f"{case.drawn_dir or '(no directory)'} (this is a bug in ccogen)")

    def _launch(self, manifest: Manifest, functions: list[Any], epoch: int,
                buffers: dict[str, int]) -> None:
        """Every kernel of one epoch, in manifest order, on this rank's stream."""
        s = self.session
        for spec, fn in zip(manifest.kernels, functions, strict=True):
            s.rt.launch(fn, spec.grid, spec.block, spec.shared_mem,
                        s.kernel_params(spec, epoch, None, buffers), s.stream,
                        spec.cooperative)

    def _capture(self, issue: Callable[[], None]) -> tuple[Any | None, str]:
        """(graph, "") from the launches `issue` makes, or (None, why) when the driver
        refuses to capture them (they then run without a graph)."""
        rt = self.session.rt
        try:
            rt.begin_capture(self.session.stream)
        except rt.CudaError as exc:
            return None, f"no CUDA graph ({exc}); timed without one"
        try:
            issue()
        except rt.CudaError as exc:
            with contextlib.suppress(rt.CudaError):
                rt.end_capture(self.session.stream)
            return None, f"no CUDA graph ({exc}); timed without one"
        try:
            return rt.end_capture(self.session.stream), ""
        except rt.CudaError as exc:
            return None, f"no CUDA graph ({exc}); timed without one"

    def _time(self, case: CaseSpec, manifest: Manifest, functions: list[Any], epoch: int,
              times: CaseTimes, buffers: dict[str, int]) -> int:
        """The timed phase; returns the next epoch index (see the module docstring)."""
        t = case.timing
        per = t.epochs_per_sample
        graph = None
        if t.graph and case.device_epoch:
            def issue() -> None:
                for i in range(per):
                    self._launch(manifest, functions, epoch + i, buffers)

            graph, note = self._capture(issue)
            if note:
                times.note = note
        next_epoch = [epoch]

        def sample() -> None:
            if graph is not None:
                graph.launch(self.session.stream)
            else:
                for i in range(per):
                    self._launch(manifest, functions, next_epoch[0] + i, buffers)
            next_epoch[0] += per

        times.mode = "graph" if graph is not None else "stream"
        self.session.phase(f"{case.key}: warm-up")
        for _ in range(t.warmup):
            sample()
        self._wait(case, "warm-up")
        self._barrier(f"{case.key}: before the timed samples")
        timer = self._read_timer(case)
        events = self._events(t.samples + 1)
        self.session.phase(f"{case.key}: timed samples")
        events[0].record(self.session.stream)
        for i in range(t.samples):
            sample()
            events[i + 1].record(self.session.stream)
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
        if not self.session.stream.wait(self.config.watchdog_s):
            self.result.error = (f"rank {self.rank}: {case.key}: the {what} did not finish "
                                 f"within {self.config.watchdog_s:g} s")
            raise Stop

    def _read_timer(self, case: CaseSpec) -> tuple[int, int] | None:
        """(sum of ns, one-way trips) a timing reference accumulated, on its timer rank."""
        if case.timer_offset is None or self.rank != case.timer_rank:
            return None
        data = self.session.rt.memcpy_dtoh(self.session.heap.pointer + case.timer_offset, 16)
        return int.from_bytes(data[:8], "little"), int.from_bytes(data[8:], "little")


def _device_name(rt: Any, device: int) -> str:
    try:
        return str(rt.device_name(device)) if hasattr(rt, "device_name") else ""
    except Exception:
        return ""


__all__ = ["BenchRank", "run_bench_rank", "worker_main"]
