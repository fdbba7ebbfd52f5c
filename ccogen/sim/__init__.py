"""The CPU simulator: byte-accurate runs of protocol instances under adversarial schedules.

An independent judge of the IR: it executes `ccogen.ir.instance.Instance` with the
semantics of the device APIs and does not use the checker.  `simulate(...)` runs
every instance (team sizes and parameters as `ccogen lint` picks them) under
seeded random schedules or exhaustively (partial-order reduction), each for
several launches (epochs), and reports failed postconditions, deadlocks and races
as diagnostics with the checker's rule codes.  See `docs/simulator.md`.

Layout: `plan` (static facts of an instance, expected values), `state` (memory
and control state), `ops` (one class per op), `engine` (the machine), `race`
(vector clocks), `schedule` (seeded, replayed and timed schedulers), `dpor`
(exhaustive exploration), `explain` (diagnostics), `report` (results), `cost`
and `trace` (Perfetto traces, notes for counterexamples).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from ccogen.diag import Diagnostic
from ccogen.ir.instance import Instance
from ccogen.ir.nodes import Protocol
from ccogen.limits import DEFAULT as DEFAULT_LIMITS
from ccogen.limits import Limits, raise_hint
from ccogen.sim.cost import model_for
from ccogen.sim.dpor import explore
from ccogen.sim.engine import StepBudget, StepLimit
from ccogen.sim.plan import Plan, build_plan
from ccogen.sim.report import InstanceReport, SimReport, SimResult, merge, result_of
from ccogen.sim.schedule import Run, Setup, run_seeded
from ccogen.sim.state import DENSE_MAX, random_image, touched_intervals
from ccogen.sim.trace import chrome_trace, to_notes

DEFAULT_SEEDS = 20
DEFAULT_EPOCHS = 2
EXHAUSTIVE_MAX_OPS = 64


def simulate(
    protocol: Protocol | str | Path,
    ranks: Iterable[int] | int | None = None,
    params: Mapping[str, int] | None = None,
    seeds: int | Iterable[int] = DEFAULT_SEEDS,
    exhaustive: bool = False,
    trace: str | Path | None = None,
    *,
    epochs: int = DEFAULT_EPOCHS,
    pieces: int = 2,
    data_seed: int = 0,
    target: str | None = None,
    max_schedules: int = 100_000,
    time_limit: float = 10.0,
    keep_memory: bool = False,
    digests: bool | None = None,
    path: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> SimReport:
    """Simulate `protocol` (a `Protocol`, `.cco` text, or a path to a `.cco` file).

    `seeds`: how many seeded random schedules (seeds 0..K-1), or which seeds.
    `exhaustive`: every schedule up to partial-order equivalence instead, bounded by
    `max_schedules` and `time_limit` CPU seconds of this process per instance (CPU, not
    wall time: the same search stops at the same point on a loaded machine).  Each schedule runs
    `epochs` launches; transfers move in `pieces` pieces.  `trace` writes a
    Chrome/Perfetto trace of the first instance's timed schedule with the cost
    model of `target` (MORI SDMA by default).  `keep_memory` keeps every
    schedule's final memory in the results; `digests` hashes it (by default when
    exploring exhaustively or keeping memory).  The windows of an instance past
    `DENSE_MAX` bytes (all ranks) are backed sparsely, only the bytes ops and `ensure`
    touch, when that halves them or is needed to stay within `limits.sim_bytes` (the
    instance report says so); an instance that would still back more is not run: it
    reports E006.  `max_schedules` and `time_limit` must allow at least one schedule
    (ValueError otherwise); an instance explored by none does not pass.
    """
    if max_schedules < 1 or time_limit <= 0:
        raise ValueError("max_schedules must be at least 1 and time_limit positive")
    from ccogen.ir.depth import depth_error

    proto, shown = _load(protocol, path)
    if (deep := depth_error(proto)) is not None:  # built in Python, past the parser's limit
        report = SimReport(proto.name, shown, epochs)
        report.instances.append(InstanceReport("(not built)", 0, setup=[deep]))
        report.diagnostics = [deep]
        return report
    sizes = _sizes(proto, ranks, params)
    if not isinstance(seeds, int):
        seeds = list(seeds)  # counted for the step limit, then run
    report = SimReport(proto.name, shown, epochs)
    setups: list[Setup] = []
    from ccogen.instantiate.runtime import uses_runtime

    drawn = uses_runtime(proto)  # run-time values: one run per drawn contents (`sim.runtime`)
    for n in sizes:
        if drawn:
            from ccogen.sim.runtime import run_drawn

            more, ready = run_drawn(
                proto, n, params, limits, data_seed, epochs, pieces,
                digests if digests is not None else exhaustive or keep_memory,
                lambda s: _run_instance(s, seeds, exhaustive, max_schedules, time_limit,
                                        keep_memory, proto, limits))
            report.instances.extend(more)
            setups.extend(ready)
            continue
        inst, diags = _instance(proto, n, params, limits)
        if inst is None:
            report.instances.append(InstanceReport(f"nranks={n}", n, setup=diags))
            continue
        plan = build_plan(inst)
        total = inst.nranks * sum(size for _, size in inst.window_sizes)
        needed = total if total <= DENSE_MAX or keep_memory else _touched_bytes(plan)
        if needed * 2 > total and total <= limits.sim_bytes:
            needed = total  # sparse would save little: back every byte
        dense_max = total if needed == total else DENSE_MAX
        if needed > limits.sim_bytes:
            report.instances.append(InstanceReport(inst.label(), n, setup=[
                _too_big(proto, inst, needed, limits.sim_bytes, sparse=needed < total)]))
            continue
        least = _least_steps(inst, epochs, seeds, exhaustive)
        if least > limits.sim_steps:
            report.instances.append(InstanceReport(inst.label(), n, setup=[
                _too_long(proto, inst, f"at least {least:,} steps ({_ops(inst):,} op "
                          f"instances x {epochs} epochs x the schedules)", limits, least)]))
            continue
        digest = digests if digests is not None else exhaustive or keep_memory
        # `launch % K` rotates K landing slots: K + 1 launches show a launch overtaking
        runs = max(epochs, inst.period + 1) if epochs > 1 else epochs
        report.epochs = max(report.epochs, runs)
        setup = Setup(plan, random_image(plan, data_seed, dense_max), runs, pieces, digest,
                      budget=StepBudget(limits.sim_steps))
        setups.append(setup)
        report.instances.append(_run_instance(setup, seeds, exhaustive, max_schedules,
                                              time_limit, keep_memory, proto, limits))
        if total > dense_max:
            report.instances[-1].backing = f"{needed:,} of {total:,} bytes"
    report.diagnostics = merge(report.instances, f"ccogen simulate {shown}")
    if trace is not None and setups:  # one timed schedule, outside the instance's budget
        report.trace = _write_trace(replace(setups[0], budget=None), trace, target, shown)
        report.trace_label = setups[0].plan.instance.label()
    return report


def _load(protocol: Protocol | str | Path, path: str | None) -> tuple[Protocol, str]:
    from ccogen.builder import Protocol as Built
    from ccogen.syntax import load_ir, parse_ir

    if isinstance(protocol, Built):  # `ccogen.load(...)`, `ccogen.parse(...)`, the builder
        protocol = protocol.ir
    if isinstance(protocol, Protocol):
        return protocol, path or f"{protocol.name}.cco"
    if isinstance(protocol, Path) or ("\n" not in protocol and protocol.endswith(".cco")):
        return load_ir(protocol), path or str(protocol)
    shown = path or "<string>"
    return parse_ir(protocol, shown), shown


def _sizes(proto: Protocol, ranks: Iterable[int] | int | None,
           params: Mapping[str, int] | None) -> list[int]:
    from ccogen.instantiate import team_sizes

    given = [ranks] if isinstance(ranks, int) else list(ranks or [])
    return team_sizes(proto, given or None, params=params)


def _instance(proto: Protocol, n: int, params: Mapping[str, int] | None, limits: Limits
              ) -> tuple[Instance | None, list[Diagnostic]]:
    from ccogen.instantiate import instantiate

    inst, diags = instantiate(proto, n, dict(params or {}), limits)
    errors = [d for d in diags if d.is_error]
    return (None, errors) if inst is None or errors else (inst, [])


def _touched_bytes(plan: Plan) -> int:
    return sum(e - s for spans in touched_intervals(plan).values() for s, e in spans)


def _too_big(proto: Protocol, inst: Instance, needed: int, limit: int, *,
             sparse: bool) -> Diagnostic:
    from ccogen.diag import error

    sizes = ", ".join(f"`{name}` {size:,} B" for name, size in inst.window_sizes)
    what = "bytes that ops and `ensure` touch" if sparse else "bytes of windows"
    return error("E006", f"simulating would hold {needed:,} {what}, over the limit "
                 f"of {limit:,} bytes", proto.span, "this protocol",
                 notes=(f"{inst.nranks} ranks, each with {sizes}", f"in the instance "
                        f"{inst.label()}"),
                 help=f"simulate smaller sizes (`--param`), or "
                      f"{raise_hint('sim-bytes', needed)}")


def _ops(inst: Instance) -> int:
    return sum(len(ops) for ops in inst.ranks)


def _least_steps(inst: Instance, epochs: int, seeds: int | Iterable[int],
                 exhaustive: bool) -> int:
    """A lower bound of the steps a simulation takes: every op instance is at least one
    step per epoch and schedule (one schedule at least when exploring)."""
    schedules = 1 if exhaustive else seeds if isinstance(seeds, int) else len(list(seeds))
    return _ops(inst) * epochs * max(schedules, 1)


def _too_long(proto: Protocol, inst: Instance, what: str, limits: Limits,
              needed: int | None) -> Diagnostic:
    from ccogen.diag import error

    return error("E006", f"simulating would take {what}, over the limit of "
                 f"{limits.sim_steps:,} steps", proto.span, "this protocol",
                 notes=(f"in the instance {inst.label()}",),
                 help=f"simulate fewer schedules (`--seeds`), epochs or smaller loops "
                      f"(`--param`), or {raise_hint('sim-steps', needed)}")


def _run_instance(setup: Setup, seeds: int | Iterable[int], exhaustive: bool,
                  max_schedules: int, time_limit: float, keep_memory: bool,
                  proto: Protocol | None = None,
                  limits: Limits = DEFAULT_LIMITS) -> InstanceReport:
    inst = setup.plan.instance
    report = InstanceReport(inst.label(), inst.nranks, exhaustive=exhaustive)
    start = time.process_time()
    runs: list[Run] = []
    chosen = range(seeds) if isinstance(seeds, int) else list(seeds)
    try:
        if exhaustive:
            explored = explore(setup, max_schedules=max_schedules, time_limit=time_limit,
                               keep_memory=keep_memory)
            runs = explored.runs
            report.complete, report.limit = explored.complete, explored.limit
        else:
            for s in chosen:
                runs.append(run_seeded(setup, s, keep_memory))
    except StepLimit:  # counted as the steps are taken (`--limit sim-steps`)
        assert setup.budget is not None and proto is not None
        done = f"{len(runs):,} schedule{'s' if len(runs) != 1 else ''}"
        report.stopped = (f"stopped at the sim-steps limit ({setup.budget.limit:,} steps, "
                          f"after {done})")
        report.setup = [_too_long(proto, inst, f"more than {setup.budget.limit:,} steps "
                                  f"(stopped after {done})", limits, None)]
    report.results = [result_of(r) for r in runs]
    report.elapsed = time.process_time() - start
    if not runs:  # the budget's own words (`stopped after 10 s`) when it ran out
        report.complete = False
        report.limit = report.limit or "no schedule explored within the limits"
    return report


def _write_trace(setup: Setup, out: str | Path, target: str | None, source: str) -> str:
    data = chrome_trace(setup, model_for(target), label=setup.plan.instance.label(),
                        source=source)
    from ccogen.fileio import write_output
    from ccogen.sim.trace import is_trace

    text = json.dumps(data, indent=None, separators=(",", ":")) + "\n"
    write_output(out, text, inputs=[source] if Path(source).is_file() else [], flag="--trace",
                 is_own=is_trace)
    return str(out)


def find_counterexample(instance: Instance, code: str, *, seeds: int = DEFAULT_SEEDS,
                        epochs: int = DEFAULT_EPOCHS) -> tuple[SimResult, list[str]] | None:
    """The first seeded schedule whose failures include `code`, with notes showing it.

    For the checker: attach the notes to a finding, with
    `help: ccogen simulate FILE --seed N shows it`.
    """
    plan = build_plan(instance)
    setup = Setup(plan, random_image(plan, 0), epochs)
    for seed in range(seeds):
        result = result_of(run_seeded(setup, seed))
        if any(d.code == code for d in result.failures):
            return result, to_notes(setup, result.schedule)
    return None


__all__ = ["DEFAULT_EPOCHS", "DEFAULT_SEEDS", "EXHAUSTIVE_MAX_OPS", "InstanceReport", "SimReport",
           "SimResult", "find_counterexample", "simulate"]
