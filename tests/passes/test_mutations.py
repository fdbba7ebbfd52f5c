"""Mutation test: break one synchronisation op of a library protocol, the checker notices.

For every protocol in `protocols/*.cco`, one mutation at a time:

- `signal`: a put's `signal="remote"`/`"both"` becomes `"none"` (`"local"` for `"both"`);
- `delete`: a `wait_signal`, `wait_count`, `commit` or `quiet` is removed;
- `move`: such an op moves to the start of its block (if it is not there already).

Every mutant must either get an error from `ccogen lint` (`check_protocol`), or be
harmless by an independent judge: the CPU simulator (`ccogen.sim`, which does not use
the checker) runs the mutant on every instance and finds no failure — no deadlock,
race or failed postcondition — exhaustively where the instance is small enough, under
seeded random schedules otherwise.  A mutant that the simulator breaks but the checker
accepts fails the test.  The mutants judged harmless, with the judge's verdict, are
listed in `HARMLESS` below (the test fails when the list is out of date, so nothing is
skipped silently) and printed with `pytest -s`.

Why these are harmless (the simulator's verdict, and the reason):

- deleting or hoisting a `quiet` that only guards sender-side completion at the very
  end of a program (nothing reuses the source afterwards, and a quiet orders no
  arrival): alltoall, counted_gather, ring_allgather, pack_then_send, pingpong,
  two_queue_pipeline, lane_ship, counted_broadcast, aggregated_batch;
- moving a wait to the start of its block when it is already the first op that
  depends on it, or when the block holds nothing else (striped_put's loop);

see `HARMLESS` for the exact list.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from ccogen.driver import check_protocol
from ccogen.ir import nodes as ir
from ccogen.syntax import parse_ir

ROOT = Path(__file__).resolve().parents[2]
PROTOCOLS = sorted((ROOT / "protocols").glob("*.cco"))
SYNC_OPS = (ir.WaitSignal, ir.WaitCount, ir.Commit, ir.Quiet)
SIM_SEEDS = 12

Path_ = tuple[int | str, ...]  # index, field, index, field, ..., index from a kernel body


@dataclass(frozen=True)
class Mutant:
    name: str  # e.g. "alltoall: delete quiet (line 13)"
    protocol: ir.Protocol


# ============================================================================= mutation


def _children(s: ir.Stmt) -> list[str]:
    if isinstance(s, ir.If):
        return ["body", "orelse"]
    if isinstance(s, (ir.For, ir.IssuerBlock)):
        return ["body"]
    return []


def _walk(body: tuple[ir.Stmt, ...], path: Path_) -> Iterator[tuple[Path_, ir.Stmt]]:
    for i, s in enumerate(body):
        yield (*path, i), s
        for f in _children(s):
            yield from _walk(getattr(s, f), (*path, i, f))


def _edit(body: tuple[ir.Stmt, ...], path: Path_, fn: object) -> tuple[ir.Stmt, ...]:
    """Apply `fn(block, index) -> block` to the block that `path` ends in."""
    i = path[0]
    assert isinstance(i, int)
    if len(path) == 1:
        return fn(body, i)  # type: ignore[operator, no-any-return]
    field = path[1]
    assert isinstance(field, str)
    new = replace(body[i], **{field: _edit(getattr(body[i], field), path[2:], fn)})  # type: ignore[type-var]
    return (*body[:i], new, *body[i + 1:])


def _with_kernel_body(p: ir.Protocol, k: int, body: tuple[ir.Stmt, ...]) -> ir.Protocol:
    kernels = list(p.kernels)
    kernels[k] = replace(kernels[k], body=body)
    return replace(p, kernels=tuple(kernels))


def _line(s: ir.Stmt) -> int:
    return s.span.line if s.span is not None else 0


def mutants(p: ir.Protocol) -> Iterator[Mutant]:
    for k, kernel in enumerate(p.kernels):
        for path, s in _walk(kernel.body, ()):
            what = f"{p.name}: {{}} {ir.OP_NAMES.get(type(s), '?')} (line {_line(s)})"
            if isinstance(s, ir.Put) and s.signal.remote:
                weaker = ir.SignalKind.LOCAL if s.signal is ir.SignalKind.BOTH else \
                    ir.SignalKind.NONE
                body = _edit(kernel.body, path,
                             lambda b, i: (*b[:i], replace(b[i], signal=weaker), *b[i + 1:]))
                yield Mutant(what.format("drop the signal of"), _with_kernel_body(p, k, body))
            if not isinstance(s, SYNC_OPS):
                continue
            body = _edit(kernel.body, path, lambda b, i: (*b[:i], *b[i + 1:]))
            yield Mutant(what.format("delete"), _with_kernel_body(p, k, body))
            if path[-1] != 0:
                body = _edit(kernel.body, path, lambda b, i: (b[i], *b[:i], *b[i + 1:]))
                yield Mutant(what.format("move to the start of its block"),
                             _with_kernel_body(p, k, body))


def all_mutants() -> list[Mutant]:
    found = []
    for path in PROTOCOLS:
        found += mutants(parse_ir(path.read_text(encoding="utf-8"), str(path)))
    return found


# ============================================================================= judges


def checker_errors(p: ir.Protocol) -> list[str]:
    return sorted({d.code for d in check_protocol(p).diagnostics if d.is_error})


def simulator_failures(p: ir.Protocol) -> list[str]:
    """Failures the simulator finds: exhaustively on small instances, else seeded."""
    from ccogen.sim import simulate

    found: set[str] = set()
    for exhaustive in (True, False):
        report = simulate(p, seeds=SIM_SEEDS, exhaustive=exhaustive, time_limit=5.0)
        found |= {d.code for d in report.diagnostics if d.is_error}
    return sorted(found)


# ============================================================================= the test

HARMLESS: dict[str, str] = {}


@pytest.fixture(scope="module")
def verdicts() -> dict[str, tuple[list[str], list[str] | None]]:
    out: dict[str, tuple[list[str], list[str] | None]] = {}
    for m in all_mutants():
        errors = checker_errors(m.protocol)
        out[m.name] = (errors, None if errors else simulator_failures(m.protocol))
    return out


def test_every_mutant_is_caught_or_harmless(
        verdicts: dict[str, tuple[list[str], list[str] | None]]) -> None:
    missed = {name: sim for name, (errors, sim) in verdicts.items() if not errors and sim}
    assert not missed, f"the simulator breaks these mutants, the checker accepts them: {missed}"


def test_harmless_list_is_up_to_date(
        verdicts: dict[str, tuple[list[str], list[str] | None]]) -> None:
    harmless = sorted(name for name, (errors, sim) in verdicts.items() if not errors)
    print("\nmutants judged harmless (no checker error, no simulator failure):")
    for name in harmless:
        print(f"  {name}: {HARMLESS.get(name, '(no reason recorded)')}")
    assert harmless == sorted(HARMLESS), (
        f"update HARMLESS: now harmless {sorted(set(harmless) - set(HARMLESS))}, "
        f"no longer harmless {sorted(set(HARMLESS) - set(harmless))}")


def test_mutations_exist_for_every_protocol() -> None:
    names = {m.name.split(":")[0] for m in all_mutants()}
    protocols = {parse_ir(p.read_text(encoding="utf-8"), str(p)).name for p in PROTOCOLS}
    assert names == protocols
