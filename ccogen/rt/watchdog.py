"""Bounds on everything a run waits for (issue 31): phases, their limits, blocking calls.

A rank records where it is (`RankSession.phase`) in `rank<N>.phase` of the run's shared
directory: the phase's text and, where the phase has a limit of its own, that limit
(`write_phase`).  The launcher (`ccogen.rt.launch.spawn_ranks`, used by `ccogen run` and
`ccogen bench`) reads every rank's file while it waits (`read_phase`): a rank that stays in
one phase past its limit — the watchdog unless the phase names another — plus
`STALL_MARGIN_S` has stalled, whatever it waits for (the engine's bootstrap, a collective
heap allocation, module registration, a host barrier, a kernel, the engine's finalize),
and the launcher stops the run naming the phase and the rank.  The margin lets the rank's
own bounded waits (kernels: `Stream.wait`; host barriers: the shim's timeout) report
first, with their better messages.

`bounded(call, timeout_s, what)` runs a blocking call that cannot be interrupted (an
engine's collective init) in a helper thread and raises `StallError` past the timeout:
the PyTorch binding, which has no launcher watching it, bounds its bootstrap so.

`CCOGEN_FAULT_STALL=RANK:PHASE[,RANK:PHASE...]` (tests only) makes rank RANK stop, for
ever, on entering the first phase whose text starts with PHASE: a rank that never
launches, a stalled bootstrap (docs/runtime.md, "Watchdog").
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from ccogen.errors import RunError
from ccogen.rt.rendezvous import read_private, write_private

T = TypeVar("T")

STALL_MARGIN_S = 10.0
STARTUP_S = 60.0  # a rank's process start (spawn, imports) on a loaded machine, at least
FAULT_ENV = "CCOGEN_FAULT_STALL"


class StallError(RunError):
    """A blocking call or a phase did not finish within its bound."""


@dataclass(frozen=True)
class Phase:
    text: str
    limit_s: float | None  # None: the run's watchdog
    since: float           # time.time() when the rank entered it


def write_phase(path: Path, text: str, limit_s: float | None = None) -> None:
    """Record that a rank entered phase `text` (with its own limit, if it has one)."""
    head = "" if limit_s is None else f"@{limit_s:g}\n"
    # atomic (the launcher never reads half a phase) and never through a planted link
    write_private(path, (head + text).encode("utf-8"))


def read_phase(path: Path) -> Phase | None:
    """The phase a rank recorded, or None when it recorded none yet."""
    try:
        text = read_private(path).decode("utf-8", errors="replace")
        since = path.stat().st_mtime
    except OSError:
        return None
    limit: float | None = None
    if text.startswith("@"):
        head, _, text = text.partition("\n")
        try:
            limit = float(head[1:])
        except ValueError:
            limit = None
    return Phase(text.strip(), limit, since)


def stalled(phase: Phase | None, started: float, watchdog_s: float,
            margin_s: float = STALL_MARGIN_S, now: float | None = None
            ) -> tuple[str, float, float] | None:
    """(phase text, seconds in it, its limit) when a rank has stalled, else None; a rank
    with no phase yet is `starting` since `started` (time.time()), for STARTUP_S at least."""
    now = time.time() if now is None else now
    text, limit, since = ("starting", max(watchdog_s, STARTUP_S), started) if phase is None \
        else (phase.text, phase.limit_s, phase.since)
    bound = watchdog_s if limit is None else limit
    age = now - since
    return (text, age, bound) if age > bound + margin_s else None


def fault_stall(rank: int, text: str, env: dict[str, str] | None = None) -> bool:
    """Whether CCOGEN_FAULT_STALL asks rank `rank` to stop in phase `text` (module doc)."""
    spec = (os.environ if env is None else env).get(FAULT_ENV, "")
    for item in spec.split(","):
        who, sep, prefix = item.partition(":")
        if sep and who.strip().isdigit() and int(who) == rank and text.startswith(prefix):
            return True
    return False


def stall_forever() -> None:  # pragma: no cover - a deliberately stuck rank, GPU tests
    threading.Event().wait()


def bounded(call: Callable[[], T], timeout_s: float, what: str) -> T:
    """`call()`'s result; its exception; StallError naming `what` when it did not return
    within `timeout_s` (the call goes on in a daemon thread: the caller should stop)."""
    box: dict[str, object] = {}
    done = threading.Event()

    def body() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=body, name=f"ccogen: {what}", daemon=True).start()
    if not done.wait(timeout_s):
        raise StallError(f"{what} did not finish within {timeout_s:g} s")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


__all__ = ["FAULT_ENV", "STALL_MARGIN_S", "STARTUP_S", "Phase", "StallError", "bounded",
           "fault_stall", "read_phase", "stall_forever", "stalled", "write_phase"]
