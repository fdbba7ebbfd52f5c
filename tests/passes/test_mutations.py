"""Mutation test: break one synchronisation op of a library protocol, the checker notices.

For every protocol in `protocols/*.cco`, one mutation at a time:

- `signal`: a put's `signal="remote"`/`"both"` becomes `"none"` (`"local"` for `"both"`);
- `delete`: a `wait_signal`, `wait_count`, `commit` or `quiet` is removed;
- `move`: such an op moves to the start of its block (if it is not there already);
- language v2: a `barrier()` or a `signal` (a credit) is removed or moved the same way;
  a `reduce` loses a source (its last one, or the first element of its comprehension)
  or adds its first source twice.

Every mutant must either get an error from `ccogen lint` (`check_protocol`), or be
harmless by an independent judge: the CPU simulator (`ccogen.sim`, which does not use
the checker) runs the mutant on every instance and finds no failure — no deadlock,
race or failed postcondition — exhaustively where the instance is small enough, under
seeded random schedules otherwise.  A mutant that the simulator breaks but the checker
accepts fails the test.  The mutants judged harmless, with the judge's verdict, are
listed in `HARMLESS` below (the test fails when the list is out of date, so nothing is
skipped silently) and printed with `pytest -s`.

Why these are harmless (the simulator's verdict, and the reason):

- deleting or hoisting a `quiet` where nothing rewrites its source before a peer has
  waited for the data (a quiet is sender-side; it orders no arrival).  Since issue 30
  no library protocol has the host between launches, so a quiet whose source is an
  input the caller rewrites after the launch is needed, and deleting it is caught
  (E025: alltoall, ring_allgather, the seed examples);
- moving `two_queue_pipeline`'s second wait above the first one of the same step (both
  still precede both copies);

see `HARMLESS` for the exact list.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from ccogen.driver import check_protocol
from ccogen.ir import nodes as ir
from ccogen.syntax import parse_ir
from tests.helpers import LIBRARY_TEST_PARAMS

ROOT = Path(__file__).resolve().parents[2]
PROTOCOLS = sorted(p for p in (ROOT / "protocols").glob("*.cco")
                   if p.stem not in LIBRARY_TEST_PARAMS)  # MoE's prefill shape: too slow here
SYNC_OPS = (ir.WaitSignal, ir.WaitCount, ir.Commit, ir.Quiet, ir.Barrier, ir.Signal)
SIM_SEEDS = 8
SIM_SCHEDULES = 200

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
            what = f"{p.name}: {{}} {ir.OP_KINDS.get(type(s), '?')} (line {_line(s)})"
            if isinstance(s, ir.Put) and s.signal.remote:
                weaker = ir.SignalKind.LOCAL if s.signal is ir.SignalKind.BOTH else \
                    ir.SignalKind.NONE
                body = _edit(kernel.body, path,
                             lambda b, i, w=weaker: (*b[:i], replace(b[i], signal=w), *b[i + 1:]))
                yield Mutant(what.format("drop the signal of"), _with_kernel_body(p, k, body))
            if isinstance(s, ir.Reduce):
                for label, srcs in _reduce_mutations(s):
                    body = _edit(kernel.body, path,
                                 lambda b, i, x=srcs: (*b[:i], replace(b[i], srcs=x,
                                                                       weights=None),
                                                       *b[i + 1:]))
                    yield Mutant(what.format(label), _with_kernel_body(p, k, body))
            if not isinstance(s, SYNC_OPS):
                continue
            body = _edit(kernel.body, path, lambda b, i: (*b[:i], *b[i + 1:]))
            yield Mutant(what.format("delete"), _with_kernel_body(p, k, body))
            if path[-1] != 0:
                body = _edit(kernel.body, path, lambda b, i: (b[i], *b[:i], *b[i + 1:]))
                yield Mutant(what.format("move to the start of its block"),
                             _with_kernel_body(p, k, body))


def _reduce_mutations(s: ir.Reduce) -> Iterator[tuple[str, object]]:
    """(what, new srcs): a contribution dropped, one doubled."""
    if isinstance(s.srcs, ir.ListComp):
        comp = s.srcs
        first = ir.Compare(ops=("!=",), operands=(ir.Var(name=comp.var), ir.Call(
            func="min", args=(comp.iter,))))
        cond = first if comp.cond is None else ir.BoolOp(op="and", values=(comp.cond, first))
        yield "drop the first source of", replace(comp, cond=cond)
        return
    if len(s.srcs) > 1:
        yield "drop the last source of", s.srcs[:-1]
    yield "double the first source of", (s.srcs[0], *s.srcs)


def all_mutants() -> list[Mutant]:
    found = []
    for path in PROTOCOLS:
        found += mutants(parse_ir(path.read_text(encoding="utf-8"), str(path)))
    return found


# ============================================================================= judges


def checker_errors(p: ir.Protocol) -> list[str]:
    return sorted({d.code for d in check_protocol(p).diagnostics if d.is_error})


def simulator_failures(p: ir.Protocol) -> list[str]:
    """Failures the simulator finds: every schedule (up to partial-order equivalence,
    bounded) of the two smallest instances, seeded random schedules of every instance."""
    from ccogen.instantiate import team_sizes
    from ccogen.sim import simulate

    small = team_sizes(p)[:2]
    # bounded by a count of schedules, not by time (a loaded machine explores less in a
    # second): the harmless mutants' explorations finish within one class each
    reports = [simulate(p, ranks=small, exhaustive=True, max_schedules=SIM_SCHEDULES,
                        time_limit=math.inf),
               simulate(p, seeds=SIM_SEEDS)]
    return sorted({d.code for r in reports for d in r.diagnostics if d.is_error})


# ============================================================================= the test

QUIET = ("a quiet completes only the sender's side (the source may be reused); nothing "
         "after it rewrites a source or depends on it")
QUIET_WAITED = ("the peer waits for the data, and the next launch rewrites the source only "
                "after the peer has (pack_then_send: `stage` after rank 1's next credit, "
                "which rank 1 sends after its wait; pingpong: each round's put is read "
                "before the reply that rank 0 waits for, and rank 0 starts the next launch "
                "only after rank 1's credit)")
QUIET_EARLY = ("the quiet now runs before its block's transfers are issued (it drains at most "
               "earlier ones); as above, no source is rewritten afterwards")

HARMLESS: dict[str, str] = {
    "alltoallv: move to the start of its block wait_signal (line 38)":
        "the wait on queue 1 moves above the wait on queue 0 of the same peer: both still "
        "end the launch, and nothing in it reads `recv` or `got`",
    'pack_then_send: delete quiet (line 23)':
        QUIET_WAITED,
    'pack_then_send: move to the start of its block quiet (line 23)':
        QUIET_EARLY,
    'pingpong: delete quiet (line 25)':
        QUIET_WAITED,
    'pingpong: delete quiet (line 29)':
        QUIET_WAITED,
    'pingpong: delete quiet (line 31)':
        "the credit's source, rank 1's `credit`, is written by nobody",
    'pingpong: move to the start of its block quiet (line 25)':
        QUIET_EARLY,
    'pingpong: move to the start of its block quiet (line 29)':
        QUIET_EARLY,
    'two_queue_pipeline: move to the start of its block wait_signal (line 31)':
        "the wait on queue 1 moves above the wait on queue 0 of the same step: both still "
        "precede both copies",
    'allreduce_twoshot: delete quiet (line 19)':
        QUIET,
    'allreduce_twoshot: move to the start of its block quiet (line 19)':
        QUIET_EARLY,
    'broadcast_pipelined: delete quiet (line 27)':
        QUIET,
    'broadcast_pipelined: move to the start of its block quiet (line 27)':
        QUIET_EARLY,
    'reduce_scatter_ring: delete quiet (line 26)':
        QUIET,
    'reduce_scatter_ring: move to the start of its block quiet (line 26)':
        QUIET_EARLY,
}


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
