"""Simulating run-time values (language v2 §3): draw contents that satisfy `require`.

A protocol whose kernels read run-time values is simulated once per *draw*: initial
contents for every window and buffer of every rank, random like any other run's
(`state.fill`), with every element that `require` bounds set to

* `low`: its lower bound (0 for a count: every run-time length 0);
* `high`: its upper bound (every count at `cap`; for a routing table, every token to
  the highest rank and none to the others);
* `mixed-N`: per element, its lower bound, its upper bound or a uniform value
  between (a third each: skewed routings, some peers with nothing);
* `interior-N`: a uniform value between the bounds for every element.

Contents that violate another `require` statement (`sum(...) <= cap`) are drawn again
(up to `RETRIES` times); a `low`/`high` draw that violates one is left out with a note
in its label.  Each draw gives a concrete instance (`instantiate(..., contents=)`).

Every launch has its own contents, as on the GPU, where the caller computes new counts
and routings before each launch (`ccogen run` draws them anew): run k starts with draw
k and its launch e has draw k + e (cyclically: `low, then high`, `high, then mixed-0`,
..., `interior-0, then low`), so that every draw starts a run once and consecutive
launches differ in every count `require` lets vary.  A launch's instance is the
concrete instance of its contents (`Plan.at`): run-time values never decide which ops
run (E004), so the launches have the same ops, with other lengths, `expected=` values
and loaded values.  The caller writes the launch's run-time inputs before it (the
buffers and the `init(...)` windows that hold run-time values: `Plan.launch_inputs`);
the rest of a later launch's contents is the first launch's (a window the caller does
not write keeps its bytes), and its data is fresh (`host`).  A load that reads the
previous launch's count (or routing row) therefore reads another value than its
launch's instance was built for: a stale load.  The runs are bounded by count (one per
draw, `epochs` launches each), not by time.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ccogen.diag import Diagnostic
from ccogen.instantiate import Contents, instantiate, preconditions
from ccogen.instantiate.runtime import derive, runtime_inputs, unsatisfied
from ccogen.instantiate.sampling import nodes_of
from ccogen.ir.dtype import DType
from ccogen.ir.instance import Instance
from ccogen.ir.nodes import Load, Protocol, Region
from ccogen.ir.values import keyed_values_into, random_values
from ccogen.limits import Limits

RETRIES = 50
DEFAULT_DRAWS = ("low", "high", "mixed-0", "mixed-1", "interior-0")


def draw(protocol: Protocol, nranks: int, params: Mapping[str, Any] | None, which: str,
         seed: int, rank: int | None = None) -> tuple[Contents | None, str]:
    """Contents of the draw `which` (`low`, `high`, `mixed-N`, `interior-N`: the module
    doc) and a label; None when no such draw satisfies `require` (the label says why).

    Every (rank, memory) is drawn from streams of its own (`_fill`), so that `rank` (a
    rank of `ccogen run` drawing its own launches) draws only its own memories and every
    rank's that `require` names (each rank checks every rank's `require`): the same bytes
    as the draw of every rank (`fill_regions` adds what its `init(...)` regions read)."""
    bounds, memories, bound = _preconditions(protocol, nranks, params)
    number = _draw_number(which)
    dtypes = {name: m.dtype for name, m in memories.items()}
    tries = 1 if which in ("low", "high") else RETRIES
    broken: list[str] = []
    # what the caller writes is this draw's; the windows it does not write are the same in
    # every draw, so that a later launch's contents keep them (`later_launch`)
    fresh = caller_written(protocol, memories)
    required = _required(protocol)  # what `require` reads or defines: copied, the rest shared
    keys = [(r, name) for r in range(nranks) for name in memories
            if rank is None or r == rank or name in required]
    data = _unwritten(protocol, nranks, params, seed, memories, fresh, keys)
    groups = _bounded(bounds)
    for attempt in range(tries):
        stream = (seed, nranks, number, attempt)
        arrays = {(r, name): _fill(stream, r, name, memories[name].count, dtypes[name])
                  if name in fresh else data[(r, name)] if name not in required
                  else data[(r, name)].copy() for r, name in keys}
        contents = Contents(arrays, dtypes, which, attempt)
        for (window, r), (indices, lo, hi) in groups.items():
            if (r, window) not in arrays:
                continue
            picks = np.random.default_rng([*stream, r, zlib.crc32(window.encode()), 1 << 30])
            contents.set_many(window, r, indices, _picks(picks, which, lo, hi))
        broken = _derive_and_check(protocol, nranks, bound, memories, contents)
        if not broken:
            return contents, which
    return None, f"{which} (left out: no contents satisfy `require` {', '.join(broken[:2])})"


def fill_regions(protocol: Protocol, nranks: int, params: Mapping[str, Any] | None,
                 seed: int, contents: Contents,
                 regions: Sequence[tuple[int, str, int, int]]) -> None:
    """Add to `contents` (a draw of one rank, `draw(..., rank=)`) the bytes `[start, stop)`
    of each (rank, memory) of `regions` it lacks, as the draw of every rank has them:
    only the chunks that hold them are drawn (the rest of such a memory is zeros that
    take no memory: `np.zeros`)."""
    _, memories, _ = _preconditions(protocol, nranks, params)
    fresh = caller_written(protocol, memories)
    number = _draw_number(contents.label)
    wanted: dict[tuple[int, str], set[int]] = {}
    for r, name, start, stop in regions:
        if (r, name) in contents.arrays and (r, name) not in contents.partial:
            continue
        chunk = _chunk_bytes(memories[name].dtype)
        wanted.setdefault((r, name), set()).update(range(start // chunk,
                                                         -(-stop // chunk)))
    for (r, name), chunks in wanted.items():
        m = memories[name]
        array = contents.arrays.get((r, name))
        if array is None:
            array = np.zeros(m.count * m.dtype.size, dtype=np.uint8)
            contents.arrays[(r, name)] = array
            contents.partial.add((r, name))
        stream = ((seed, nranks, number, contents.attempt) if name in fresh
                  else (seed, nranks, _UNWRITTEN_STREAM, 0))
        for c in sorted(chunks):
            _fill_chunk(stream, r, name, m.count, m.dtype, c, array)


CHUNK_BYTES = 1 << 22  # a memory is drawn in chunks of 4 MiB, each from its own stream
_UNWRITTEN_STREAM = -1


def _chunk_bytes(dtype: DType) -> int:
    return CHUNK_BYTES - CHUNK_BYTES % dtype.size


def _fill(stream: tuple[int, ...], rank: int, name: str, count: int, dtype: DType
          ) -> np.ndarray:
    """Random contents of `name` on `rank` (`random_values`), chunk by chunk, chunk c
    from the generator of (stream, rank, name, c): any part can be drawn alone."""
    out = np.empty(count * dtype.size, dtype=np.uint8)
    for c in range(-(-out.size // _chunk_bytes(dtype))):
        _fill_chunk(stream, rank, name, count, dtype, c, out)
    return out


def _fill_chunk(stream: tuple[int, ...], rank: int, name: str, count: int, dtype: DType,
                chunk: int, out: np.ndarray) -> None:
    size = _chunk_bytes(dtype)
    start, stop = chunk * size, min((chunk + 1) * size, count * dtype.size)
    rng = np.random.default_rng([*(s if s >= 0 else (1 << 32) + s for s in stream), rank,
                                 zlib.crc32(name.encode()), chunk])
    if dtype in (DType.BF16, DType.F16, DType.F32):
        keyed_values_into(rng, out[start:stop], dtype)
    else:
        out[start:stop] = random_values(rng, (stop - start) // dtype.size, dtype)


_BOUNDED: list[tuple[object, dict[tuple[str, int], tuple[np.ndarray, np.ndarray,
                                                           np.ndarray]]]] = []


def _bounded(bounds: Mapping[tuple[str, int, int], tuple[int | None, int | None]]
             ) -> dict[tuple[str, int], tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The bounded elements by (memory, rank): indices in order and their bounds (an
    absent bound is the other one; neither: 0), kept for the next draws."""
    for key, value in _BOUNDED:
        if key is bounds:
            return value
    grouped: dict[tuple[str, int], tuple[list[int], list[int], list[int]]] = {}
    for (window, rank, index), (lo, hi) in sorted(bounds.items()):
        if lo is None and hi is None:
            lo = hi = 0
        lo = hi if lo is None else lo
        hi = lo if hi is None else hi
        at = grouped.setdefault((window, rank), ([], [], []))
        at[0].append(index)
        at[1].append(int(lo))  # type: ignore[arg-type]
        at[2].append(int(hi))  # type: ignore[arg-type]
    value = {k: (np.array(i, dtype=np.int64), np.array(lo, dtype=np.int64),
                 np.array(hi, dtype=np.int64)) for k, (i, lo, hi) in grouped.items()}
    _BOUNDED[:] = [*_BOUNDED[-3:], (bounds, value)]
    return value


def _picks(rng: np.random.Generator, which: str, lo: np.ndarray, hi: np.ndarray
           ) -> np.ndarray:
    """The values of bounded elements: `low` each lower bound, `high` each upper one,
    `mixed` per element the lower, the upper or one between (a third each), `interior`
    one between."""
    if which == "low":
        return lo
    if which == "high":
        return hi
    between = rng.integers(lo, hi + 1) if lo.size else lo
    if which.startswith("mixed"):
        choice = rng.integers(0, 3, size=lo.size)
        return np.where(choice == 0, lo, np.where(choice == 1, hi, between))
    return between


_PRECONDITIONS: list[tuple[Protocol, int, tuple[tuple[str, Any], ...], Any]] = []


def _preconditions(protocol: Protocol, nranks: int, params: Mapping[str, Any] | None
                   ) -> Any:
    """`preconditions` of the instance, kept for the next draws of the same instance
    (they depend on the protocol, team size and parameters only; a MoE prefill instance
    takes seconds: every epoch of `ccogen run` draws anew)."""
    key = tuple(sorted((k, str(v)) for k, v in (params or {}).items()))
    for p, n, k, value in _PRECONDITIONS:
        if p is protocol and n == nranks and k == key:
            return value
    value = preconditions(protocol, nranks, params)
    _PRECONDITIONS[:] = [*_PRECONDITIONS[-3:], (protocol, nranks, key, value)]
    return value


_UNWRITTEN: list[tuple[Protocol, int, tuple[tuple[str, str], ...], int, Any]] = []


def _unwritten(protocol: Protocol, nranks: int, params: Mapping[str, Any] | None, seed: int,
               memories: Mapping[str, Any], fresh: frozenset[str],
               keys: Sequence[tuple[int, str]]) -> dict[tuple[int, str], np.ndarray]:
    """The contents of the windows the caller does not write (of `keys`): the same in
    every draw (of `seed`), so kept for the next draw of the same instance.  Read-only: a
    draw shares them (copies those `require` names, which it may define elements of); the
    simulator and `ccogen run` copy what they write into."""
    key = tuple(sorted((k, str(v)) for k, v in (params or {}).items()))
    data: dict[tuple[int, str], np.ndarray] | None = None
    for p, n, k, s, value in _UNWRITTEN:
        if p is protocol and n == nranks and k == key and s == seed:
            data = value
    if data is None:
        data = {}
        _UNWRITTEN[:] = [*_UNWRITTEN[-1:], (protocol, nranks, key, seed, data)]
    for rank, name in keys:
        if name in fresh or (rank, name) in data:
            continue
        m = memories[name]
        array = _fill((seed, nranks, _UNWRITTEN_STREAM, 0), rank, name, m.count, m.dtype)
        array.flags.writeable = False  # shared by every draw: nobody writes them
        data[(rank, name)] = array
    return data


def _required(protocol: Protocol) -> frozenset[str]:
    """The windows and buffers `require` names."""
    return frozenset(node.window for node in nodes_of(protocol.require)
                     if isinstance(node, Load))


def _derive_and_check(protocol: Protocol, nranks: int, bound: Mapping[str, int],
                      memories: Mapping[str, Any], contents: Contents) -> list[str]:
    """Set the elements `require` defines and say which `require` the contents violate:
    vectorised (`ccogen.instantiate.vector`), or interpreted where that does not apply
    (the same contents and verdicts: tests/runtime/test_prepare.py)."""
    from ccogen.instantiate.vector import Unsupported, Vector

    vector = Vector(protocol, nranks, bound, contents)
    try:
        vector.derive()
    except Unsupported:
        derive(protocol, nranks, bound, memories, contents)
    try:
        return vector.unsatisfied()
    except Unsupported:
        return unsatisfied(protocol, nranks, bound, memories, contents)


def caller_written(protocol: Protocol, memories: Mapping[str, Any]) -> frozenset[str]:
    """The windows and buffers whose contents each draw (and each launch) has anew: what
    the caller writes, the buffers and the windows `ensure` names as `init(...)`."""
    caller = {name for name, m in memories.items() if m.buffer}
    caller.update(node.window for node in nodes_of(protocol.ensure)
                  if isinstance(node, Load | Region) and node.init)
    return frozenset(caller)


def _draw_number(which: str) -> int:
    return sum(ord(c) * (i + 1) for i, c in enumerate(which))


def concrete_instances(protocol: Protocol, nranks: int, params: Mapping[str, Any] | None,
                       limits: Limits, data_seed: int = 0,
                       which_draws: tuple[str, ...] = DEFAULT_DRAWS
                       ) -> list[tuple[str, Instance | None, list[Diagnostic], Contents | None]]:
    """(label, instance, errors, contents) per draw."""
    out: list[tuple[str, Instance | None, list[Diagnostic], Contents | None]] = []
    for which in which_draws:
        contents, label = draw(protocol, nranks, params, which, data_seed)
        if contents is None:
            out.append((label, None, [], None))
            continue
        inst, diags = instantiate(protocol, nranks, dict(params or {}), limits,
                                  contents=contents)
        errors = [d for d in diags if d.is_error]
        out.append((label, None if errors else inst, errors, contents))
    return out


def image_of(contents: Contents, windows: tuple[tuple[str, int], ...], nranks: int) -> Any:
    """The simulator's initial image (dense) holding `contents`."""
    from ccogen.sim.state import Image

    image = Image()
    image.sizes = {}
    for rank in range(nranks):
        for name, size in windows:
            key = (rank, name)
            image.sizes[key] = size
            image[key] = contents.arrays[key].copy()
    return image


__all__ = ["DEFAULT_DRAWS", "Drawn", "caller_keys", "caller_written", "concrete_instances",
           "contents_with", "draw", "image_of", "later_launch", "launch_plan", "run_contents",
           "run_drawn", "too_big"]


def run_drawn(protocol: Protocol, nranks: int, params: Mapping[str, Any] | None,
              limits: Limits, data_seed: int, epochs: int, pieces: int, digest: bool,
              run: Any) -> tuple[list[Any], list[Any]]:
    """Simulate every draw: (instance reports, setups).  `run(setup)` runs one setup
    (`ccogen.sim._run_instance` with the caller's seeds and limits)."""
    from ccogen.instantiate import instantiate as symbolic
    from ccogen.sim.engine import StepBudget
    from ccogen.sim.plan import generated_counter_waits, runtime_expected_waits
    from ccogen.sim.report import InstanceReport
    from ccogen.sim.schedule import Setup

    early = _declared_too_big(protocol, nranks, params, limits)
    if early is not None:
        return [early], []
    inst, diags = symbolic(protocol, nranks, dict(params or {}), limits)
    errors = [d for d in diags if d.is_error]
    if inst is None or errors:
        return [InstanceReport(f"nranks={nranks}", nranks, setup=errors)], []
    memories = inst.window_sizes + inst.buffer_sizes
    total = nranks * sum(size for _, size in memories)
    if total > limits.sim_bytes:  # every draw holds every byte of every rank: say so first
        return [InstanceReport(inst.label(), nranks, setup=[
            too_big(protocol, inst, total, limits.sim_bytes)])], []
    generated = generated_counter_waits(inst)  # what the generated code waits for (E035)
    takes_off = runtime_expected_waits(inst)
    reports, setups = [], []
    usable: list[Drawn] = []
    for label, concrete, errs, contents in concrete_instances(protocol, nranks, params, limits,
                                                              data_seed):
        if concrete is None or contents is None:
            if errs:
                reports.append(InstanceReport(f"{inst.label()}, contents {label}", nranks,
                                              setup=errs))
            continue
        usable.append(Drawn(label, concrete, contents))
    for k, first in enumerate(usable):  # run k: draw k, then draw k + 1, ... (module doc)
        runs = [first] + [later_launch(protocol, nranks, params, limits, first,
                                       usable[(k + e) % len(usable)]) for e in range(1, epochs)]
        plan, label = launch_plan(runs, generated, takes_off)
        setup = Setup(plan, image_of(first.contents, plan.windows, nranks), epochs, pieces,
                      digest, budget=StepBudget(limits.sim_steps))
        setups.append(setup)
        report = run(setup)
        report.label = f"{first.instance.label()}, contents {label}"
        reports.append(report)
    return reports, setups


def _declared_too_big(protocol: Protocol, nranks: int, params: Mapping[str, Any] | None,
                      limits: Limits) -> Any:
    """The E006 report of an instance whose windows and buffers alone are over
    `sim-bytes`, decided on the checker's sampled instance (`instantiate(sample=True)`:
    loops kept to three iterations, the same declarations, label and diagnostics as the
    unrolled one; docs/simulator.md, "Cost"), before the unrolled instance is built: at
    the MoE defaults that instance takes minutes and gigabytes only to be refused here.
    None when they fit, or when the sampled instance has errors or is not built (the
    unrolled path then reports, as before)."""
    from ccogen.instantiate import instantiate as symbolic
    from ccogen.sim.report import InstanceReport

    inst, diags = symbolic(protocol, nranks, dict(params or {}), limits, sample=True)
    if inst is None or any(d.is_error for d in diags):
        return None
    total = nranks * sum(size for _, size in inst.window_sizes + inst.buffer_sizes)
    if total <= limits.sim_bytes:
        return None
    return InstanceReport(inst.label(), nranks, setup=[
        too_big(protocol, inst, total, limits.sim_bytes)])


@dataclass(frozen=True)
class Drawn:
    """One launch's drawn contents and the concrete instance of them."""

    label: str
    instance: Instance
    contents: Contents


def later_launch(protocol: Protocol, nranks: int, params: Mapping[str, Any] | None,
                 limits: Limits, first: Drawn, drawn: Drawn) -> Drawn:
    """The contents of a later launch of the run that `first` starts: `drawn`'s for what
    the caller writes (`caller_keys`), `first`'s for the windows it does not write (their
    bytes stay); `first` again when no such contents satisfy `require` (the label says)."""
    if drawn is first:
        return first
    keep = set(drawn.contents.arrays) - caller_keys(first.instance)
    if all(np.array_equal(drawn.contents.arrays[k], first.contents.arrays[k]) for k in keep):
        return drawn  # the usual case: the draws share those windows (`draw`)
    arrays = {k: first.contents.arrays[k].copy() if k in keep else a.copy()
              for k, a in drawn.contents.arrays.items()}
    contents = Contents(arrays, dict(drawn.contents.dtypes), drawn.label)
    _, memories, bound = preconditions(protocol, nranks, params)
    derive(protocol, nranks, bound, memories, contents)
    again = f"{first.label} again"
    if unsatisfied(protocol, nranks, bound, memories, contents):
        return Drawn(f"{again} ({drawn.label} violates `require` with the first launch's "
                     "windows)", first.instance, first.contents)
    inst, diags = instantiate(protocol, nranks, dict(params or {}), limits, contents=contents)
    if inst is None or any(d.is_error for d in diags):
        return Drawn(f"{again} ({drawn.label} does not instantiate)", first.instance,
                     first.contents)
    return Drawn(drawn.label, inst, contents)


def caller_keys(instance: Instance) -> frozenset[tuple[int, str]]:
    """What the caller writes before every launch: every buffer of every rank, and the
    windows `ensure` reads as `init(...)` (`Plan.init_windows`)."""
    from ccogen.sim.plan import init_keys

    buffers = {(rank, name) for rank in range(instance.nranks)
               for name, _ in instance.buffer_sizes}
    return frozenset(buffers) | init_keys((instance,))


def launch_plan(runs: Sequence[Drawn], generated: Mapping[tuple[int, int], tuple[int, int]],
                takes_off: frozenset[tuple[int, int]] = frozenset()) -> tuple[Any, str]:
    """The plan of one run, launch e with `runs[e]` (`Plan.launches`, `Plan.launch_inputs`),
    and its label (`low, then high`)."""
    from ccogen.sim.plan import build_plan

    first = runs[0]
    label = ", then ".join(r.label for r in runs)
    try:
        plan = build_plan(first.instance, generated, [r.instance for r in runs[1:]],
                          takes_off)
    except ValueError as exc:  # run-time values decide no op (E004): not expected
        same = [first.instance] * (len(runs) - 1)
        return (build_plan(first.instance, generated, same, takes_off),
                f"{first.label} every launch ({exc})")
    names = runtime_inputs(first.instance.protocol)
    keys = sorted(k for k in caller_keys(first.instance) if k[1] in names)
    plan.launch_inputs = tuple({k: r.contents.arrays[k] for k in keys} for r in runs)
    return plan, label


def too_big(protocol: Protocol, inst: Instance, needed: int, limit: int) -> Diagnostic:
    """E006: the drawn contents of an instance would not fit `sim-bytes` (checked before
    anything is drawn: a draw holds every byte of every window and buffer of every rank)."""
    from ccogen.diag import error
    from ccogen.limits import raise_hint

    sizes = ", ".join(f"`{name}` {size:,} B" for name, size in
                      inst.window_sizes + inst.buffer_sizes)
    return error("E006", f"simulating drawn contents would hold {needed:,} bytes of windows "
                 f"and buffers, over the limit of {limit:,} bytes", protocol.span,
                 "this protocol",
                 notes=(f"{inst.nranks} ranks, each with {sizes}",
                        "run-time values are simulated on drawn contents, every byte of every "
                        "rank held (no sparse backing)", f"in the instance {inst.label()}"),
                 help=f"simulate smaller sizes (`--param`), or {raise_hint('sim-bytes', needed)}")


def contents_with(protocol: Protocol, nranks: int, params: Mapping[str, Any] | None,
                  given: Mapping[str, Sequence[np.ndarray]], seed: int = 0) -> Contents:
    """Contents holding `given[name][rank]` (element values) for the named windows and
    buffers, random elsewhere, with the inputs that `require` defines (`x[i] == EXPR`)
    derived; ValueError when they violate `require`."""
    from ccogen.ir.values import encode

    _, memories, bound = preconditions(protocol, nranks, params)
    arrays = {(rank, name): _fill((seed, nranks), rank, name, m.count, m.dtype)
              for rank in range(nranks) for name, m in memories.items()}
    for name, per_rank in given.items():
        if name not in memories:
            raise ValueError(f"`{name}` is not a window or buffer of `{protocol.name}`")
        m = memories[name]
        for rank, values in enumerate(per_rank):
            flat = np.asarray(values).reshape(-1)
            if flat.size != m.count:
                raise ValueError(f"`{name}` holds {m.count} elements, {flat.size} given")
            arrays[(rank, name)] = encode(flat.astype(np.float32 if m.dtype.is_float
                                                      else np.int64), m.dtype).copy()
    contents = Contents(arrays, {n: m.dtype for n, m in memories.items()}, "given")
    derive(protocol, nranks, bound, memories, contents)
    broken = unsatisfied(protocol, nranks, bound, memories, contents)
    if broken:
        raise ValueError(f"the contents violate `require` ({', '.join(broken[:3])})")
    return contents


def run_contents(protocol: Protocol, nranks: int, params: Mapping[str, Any] | None,
                 contents: Contents, seeds: int = 4, epochs: int = 2,
                 limits: Limits | None = None) -> Any:
    """Simulate one instance for `contents` (seeded schedules, memory kept): an
    `InstanceReport` whose results hold each schedule's final memory.  The given contents
    come again at every launch (the caller hands the same tensors), so the final memory
    is theirs."""
    from ccogen.limits import DEFAULT
    from ccogen.sim.plan import build_plan
    from ccogen.sim.report import InstanceReport, result_of
    from ccogen.sim.schedule import Setup, run_seeded

    inst, diags = instantiate(protocol, nranks, dict(params or {}), limits or DEFAULT,
                              contents=contents)
    errors = [d for d in diags if d.is_error]
    if inst is None or errors:
        return InstanceReport(f"nranks={nranks}", nranks, setup=errors)
    plan = build_plan(inst)
    plan.runtime_inputs = plan.buffers  # the caller hands the given contents every launch
    setup = Setup(plan, image_of(contents, plan.windows, nranks), epochs, 2, True)
    report = InstanceReport(f"{inst.label()}, contents {contents.label}", nranks)
    report.results = [result_of(run_seeded(setup, s, True)) for s in range(seeds)]
    return report
