"""What `ccogen run` prepares on the host, from the protocol, without the unrolled instance.

The unrolled instance (one op instance per rank x token x peer) is what the simulator
interprets; a run needs less: the layout (windows, buffers and their sizes: the checked
instance has them, `Compiled.checked`), each epoch's contents (`ccogen.sim.runtime.draw`,
which reads `require`, not the kernels) and the `ensure` comparisons of the rank
(`ccogen.instantiate.checks.ensure_checks`: `ensure` evaluated alone, for one rank).  At
4096 tokens x 7168 bf16 on 8 ranks the unrolled instance took minutes and GiBs; this
path takes seconds (docs/performance.md, "the library at real shapes").

`coalesce` then merges the comparisons that continue each other (token t's row and token
t + 1's, both sides contiguous, the same windows and ranks): an `==` over the union holds
exactly when each part does, so the verdict is unchanged and a MoE rank checks a few
large regions with numpy instead of 10^4 rows.  Empty `==` comparisons (tokens not routed
to the rank: length 0) hold whatever the data and are dropped.

The unrolled path stays, as the oracle: `CCOGEN_RUN_UNROLLED=1` makes `ccogen run` (and
each epoch's draw) build the unrolled instance as before; tests/runtime/test_prepare.py
compares both paths' comparisons, contents and verdicts on every library protocol.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ccogen.errors import RunError
from ccogen.rt.data import CheckSpec, RegionSpec, check_specs

if TYPE_CHECKING:
    from ccogen.instantiate.runtime import Contents
    from ccogen.ir.nodes import Protocol

UNROLLED_ENV = "CCOGEN_RUN_UNROLLED"
INTERPRETED_ENV = "CCOGEN_ENSURE_INTERPRETED"  # `ensure` by the interpreter (the comparison)


def unrolled() -> bool:
    """Whether `ccogen run` takes the unrolled path (the oracle: `CCOGEN_RUN_UNROLLED=1`)."""
    return os.environ.get(UNROLLED_ENV, "") not in ("", "0")


def checks_for(protocol: Protocol, nranks: int, params: Mapping[str, Any],
               contents: Contents | None = None, ranks: Sequence[int] | None = None,
               where: str = "") -> list[CheckSpec]:
    """The `ensure` comparisons of `ranks` (default every rank) for `contents`, coalesced;
    RunError (a bug: the checker accepted the protocol) when the instance has errors.
    `ensure` is evaluated with numpy over its loops (ccogen/rt/ensure_vector.py) where it
    can be, else by the interpreter (the same comparisons: tests/runtime/test_prepare.py)."""
    fast = vectorised_checks(protocol, nranks, params, contents, ranks)
    if fast is not None:
        return fast
    checks, diags = _ensure_checks(protocol, nranks, params, contents, ranks)
    if checks is None:
        errors = [d for d in diags if d.is_error]
        detail = "; ".join(d.message for d in errors[:3])
        raise RunError(f"{where or protocol.name}: the `ensure` of "
                       f"{'the drawn contents' if contents is not None else 'the instance'}"
                       f" has errors: {detail} (this is a bug in ccogen: `ccogen simulate` "
                       "the protocol with the same parameters to reproduce it)")
    return coalesce(check_specs(checks))


def vectorised_checks(protocol: Protocol, nranks: int, params: Mapping[str, Any],
                      contents: Contents | None = None, ranks: Sequence[int] | None = None
                      ) -> list[CheckSpec] | None:
    """`checks_for` evaluated with numpy (None: outside its subset, or the instance has
    errors; the interpreter then decides and reports)."""
    from ccogen.instantiate import uses_runtime
    from ccogen.instantiate.checks import ITERATIONS, declared
    from ccogen.limits import DEFAULT
    from ccogen.rt.ensure_vector import EnsureVector, Unsupported

    if os.environ.get(INTERPRETED_ENV, "") not in ("", "0"):
        return None
    # what the kernels load after an op wrote it (moe_combine's `peer_ntok`, the count a
    # credit carries) changes what they do, not what `ensure` expects: only `ensure`'s
    # own loads of final contents are outside the subset (`EnsureVector._load` refuses them)
    if uses_runtime(protocol) and contents is None:
        return None
    found = declared(protocol, nranks, params)
    if found is None:
        return None
    bound, memories = found
    if any(m is None for m in memories.values()):
        return None
    try:
        return EnsureVector(protocol, nranks, bound, contents, memories,
                            DEFAULT.op_instances, ITERATIONS
                            ).specs(range(nranks) if ranks is None else ranks)
    except Unsupported:
        return None


def _ensure_checks(protocol: Protocol, nranks: int, params: Mapping[str, Any],
                   contents: Contents | None, ranks: Sequence[int] | None
                   ) -> tuple[Any, list[Any]]:
    from ccogen.instantiate.checks import ensure_checks

    return ensure_checks(protocol, nranks, params, contents, ranks)


def reads_remote_finals(protocol: Protocol) -> bool:
    """Whether some `ensure` comparison reads the final contents of another rank's window
    (`w@p[...]`, not `init(w@p)`): its ranks then exchange finals after each epoch, and
    every rank must know every rank's comparisons to meet at the same barriers."""
    from ccogen.instantiate.sampling import nodes_of
    from ccogen.ir.nodes import Region

    return any(isinstance(node, Region) and not node.init and node.rank is not None
               for node in nodes_of(protocol.ensure))


def _continues(a: CheckSpec, b: CheckSpec) -> bool:
    """`b` compares the bytes right after `a`'s on both sides (same rank, windows, ranks)."""
    ar, br = a.right, b.right
    return (a.op == b.op == "==" and a.reduction is None and b.reduction is None
            and ar is not None and br is not None and a.rank == b.rank
            and a.location == b.location
            and _next(a.left, b.left) and _next(ar, br))


def _next(a: RegionSpec, b: RegionSpec) -> bool:
    return (a.window == b.window and a.rank == b.rank and a.init == b.init
            and a.stop == b.start)


def _empty(c: CheckSpec) -> bool:
    return (c.op == "==" and c.reduction is None and c.right is not None
            and c.left.start == c.left.stop and c.right.start == c.right.stop)


def coalesce(specs: Iterable[CheckSpec]) -> list[CheckSpec]:
    """`specs` with every run of comparisons that continue each other merged into one
    (runs of one `ensure` line: a failure still names its line) and the empty `==`
    comparisons dropped (the verdict of the whole is unchanged)."""
    runs: list[tuple[CheckSpec, CheckSpec]] = []  # (first, last) of each run
    for c in specs:
        if _empty(c):
            continue
        if runs and _continues(runs[-1][1], c):
            runs[-1] = (runs[-1][0], c)
            continue
        runs.append((c, c))
    out = []
    for first, last in runs:
        if first is last:
            out.append(first)
            continue
        assert first.right is not None and last.right is not None
        out.append(replace(first, left=replace(first.left, stop=last.left.stop),
                           right=replace(first.right, stop=last.right.stop)))
    return out


__all__ = ["INTERPRETED_ENV", "UNROLLED_ENV", "checks_for", "coalesce", "reads_remote_finals",
           "unrolled", "vectorised_checks"]
