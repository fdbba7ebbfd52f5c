"""The contents `ccogen bench` times a run-time protocol on (language v2 §3).

A protocol that reads run-time values (`load(...)`, `require:`) cannot be timed on
random bytes: a count above `cap` writes past its region.  For each swept value the
planner draws ONE set of contents that satisfies `require` (`ccogen.rt.drawn.draw_named`,
the simulator's drawing code, as `ccogen run` does every epoch), chosen with
`--contents`:

* `interior` (the default): every bounded element uniform between its bounds (counts
  between 0 and `cap`, routings spread over the ranks);
* `low`: every bounded element at its lower bound (every count 0: nothing moves);
* `high`: at its upper bound (every count `cap`; every token to the highest rank);
* `mixed`: per element the lower bound, the upper bound or a value between (skewed
  routings, ranks that receive nothing).

The generated and the reference kernels of one value get the same contents (one draw
per value, from `--seed`).  The verified epochs fill every window and buffer with them
and check `ensure` against the instance of those contents; the timed epochs that follow
do not refill, so they read what the verified epoch left.  That is the same input when
no launch writes a window or buffer that `require` constrains; when one does, the
contents a launch leaves are simulated (`ccogen.sim.runtime.run_contents`) and checked
against `require` (`relaunch`): contents that no longer satisfy it are not timed;
contents that still do are timed, with a note.  The link bytes of the point (GB/s, the
NCCL collective's size) are the drawn instance's: the bytes these contents move.
"""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ccogen.rt.drawn import DrawSpec, EpochDraw, draw_named

if TYPE_CHECKING:
    from ccogen.ir.instance import Instance

CONTENTS = ("interior", "low", "high", "mixed")
DEFAULT_CONTENTS = "interior"
DESCRIPTIONS = {
    "interior": "uniform between `require`'s bounds",
    "low": "every bounded value at its lower bound",
    "high": "every bounded value at its upper bound",
    "mixed": "each bounded value at its lower bound, its upper bound or between",
}


def draw_name(kind: str) -> str:
    """The simulator's draw of a `--contents` choice (`interior-0`, `mixed-0`: the first
    random draw of that kind for the seed)."""
    if kind not in CONTENTS:
        raise ValueError(f"--contents is one of {', '.join(CONTENTS)}, not {kind!r}")
    return kind if kind in ("low", "high") else f"{kind}-0"


@dataclass(frozen=True)
class BenchContents:
    """One value's drawn contents: what the verified epochs fill, what the timed ones read."""

    spec: DrawSpec
    draw: EpochDraw
    kind: str                # the --contents choice
    problem: str | None      # why the timed epochs would not read valid contents, if so
    rewritten: str = ""      # a note: launches rewrite what `require` constrains, validly

    @property
    def describe(self) -> str:
        """`interior-0 (uniform between require's bounds, seed 0)`: for the report."""
        return f"{self.draw.label} ({DESCRIPTIONS[self.kind]}, seed {self.spec.seed})"


def draw_for(instance: Instance, kind: str, seed: int) -> tuple[BenchContents, Instance] | None:
    """The contents of `kind` for a run-time instance and the instance of those contents
    (None for a protocol without run-time values); RunError when no such contents
    satisfy `require`."""
    spec = DrawSpec.of(instance, seed)
    if spec is None:
        return None
    drawn, concrete = draw_named(spec, draw_name(kind))
    problem, rewritten = relaunch(spec, drawn, concrete)
    return BenchContents(spec, drawn, kind, problem, rewritten), concrete


def write_draw(draw: EpochDraw, path: Path) -> Path:
    """The draw as `ccogen.rt.drawn.load_epoch` reads it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(draw))
    return path


# ------------------------------------------------------------------------ the timed epochs


def required_names(protocol: Any) -> set[str]:
    """The windows and buffers whose initial contents `require` reads."""
    names: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, (list, tuple)):
            for item in node:
                walk(item)
            return
        if not dataclasses.is_dataclass(node) or isinstance(node, type):
            return
        window = getattr(node, "window", None)
        if type(node).__name__ == "Load" and isinstance(window, str):
            names.add(window)
        for f in dataclasses.fields(node):
            if f.name != "span":
                walk(getattr(node, f.name))

    walk(protocol.require)
    return names


def written_names(instance: Instance) -> set[str]:
    """The windows and buffers a launch of `instance` writes (put, get, copy, reduce)."""
    return {op.dst.window for ops in instance.ranks for op in ops if op.dst is not None}


def relaunch_problem(spec: DrawSpec, draw: EpochDraw, concrete: Instance) -> str | None:
    """None when a launch that follows a verified epoch, with nothing refilled, reads
    contents that satisfy `require` (module doc); else why it would not."""
    return relaunch(spec, draw, concrete)[0]


def relaunch(spec: DrawSpec, draw: EpochDraw, concrete: Instance) -> tuple[str | None, str]:
    """(`relaunch_problem`, a note when a launch rewrites what `require` constrains but
    leaves contents that still satisfy it: the timed epochs then read those)."""
    overwritten = sorted(required_names(spec.protocol) & written_names(concrete))
    if not overwritten:
        return None, ""
    names = ", ".join(f"`{n}`" for n in overwritten)
    broken = _after_one_launch(spec, draw)
    if broken is None:
        return (f"a launch writes {names}, which `require` constrains, and the contents it "
                "leaves could not be simulated (the timed epochs do not refill)"), ""
    if broken:
        return (f"a launch overwrites {names}, which `require` constrains, and the next "
                f"launch would read contents that violate it ({', '.join(broken[:3])}; the "
                "timed epochs do not refill)"), ""
    return None, (f"a launch rewrites {names}, which `require` constrains; what it leaves "
                  "still satisfies `require` (simulated), and the timed epochs, which do not "
                  "refill, read that")


def _after_one_launch(spec: DrawSpec, draw: EpochDraw) -> list[str] | None:
    """The `require` statements that the contents one simulated launch leaves violate
    (None when the simulator could not run it)."""
    import numpy as np

    from ccogen.instantiate import Contents, preconditions
    from ccogen.instantiate.runtime import unsatisfied
    from ccogen.sim.runtime import run_contents

    params = dict(spec.params)
    _, memories, bound = preconditions(spec.protocol, spec.nranks, params)
    dtypes = {name: m.dtype for name, m in memories.items()}
    start = Contents({k: v.copy() for k, v in draw.arrays.items()}, dtypes, draw.label)
    try:
        report = run_contents(spec.protocol, spec.nranks, params, start, seeds=1, epochs=1)
    except Exception:  # the simulator's own limits (sizes): undecided
        return None
    results = getattr(report, "results", None) or []
    memory = getattr(results[0], "memory", None) if results else None
    if memory is None:
        return None
    after = {key: np.frombuffer(bytes(memory[key]), dtype=np.uint8).copy()
             if key in memory else value for key, value in draw.arrays.items()}
    return unsatisfied(spec.protocol, spec.nranks, bound, memories,
                       Contents(after, dtypes, draw.label))


__all__ = ["CONTENTS", "DEFAULT_CONTENTS", "BenchContents", "draw_for", "draw_name",
           "relaunch", "relaunch_problem", "required_names", "write_draw", "written_names"]
