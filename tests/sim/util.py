"""Helpers for the simulator tests: build a machine from `.cco` text and steer it."""

from __future__ import annotations

import textwrap
from collections.abc import Callable

import numpy as np

from ccogen.instantiate import instantiate
from ccogen.ir.instance import Issuer, RegionInst
from ccogen.sim.engine import Machine
from ccogen.sim.plan import build_plan
from ccogen.sim.schedule import Setup
from ccogen.sim.state import random_image
from ccogen.syntax import parse_ir


def setup_of(text: str, nranks: int = 2, *, epochs: int = 1, pieces: int = 2,
             **params: int) -> Setup:
    inst, diags = instantiate(parse_ir(textwrap.dedent(text), "t.cco"), nranks, params)
    assert inst is not None and not [d for d in diags if d.is_error], diags
    plan = build_plan(inst)
    return Setup(plan, random_image(plan, 0), epochs, pieces)


def issuer(setup: Setup, rank: int, *, block: int = 0, warp: int | None = None,
           lane: int | None = None) -> int:
    want = Issuer(block, warp, lane)
    for p, ip in enumerate(setup.plan.issuers):
        if ip.rank == rank and ip.issuer == want:
            return p
    raise KeyError(f"no issuer {want} on rank {rank}")


def queue(setup: Setup, rank: int, peer: int, q: int = 0) -> int:
    return setup.plan.queue_proc((rank, peer, q))


def step(m: Machine, *procs: int) -> None:
    for p in procs:
        assert p in m.enabled, f"process {p} is not enabled (enabled: {m.enabled})"
        m.step(p)


def run_while(m: Machine, choose: Callable[[list[int]], int | None]) -> None:
    """Step the process `choose` picks among the enabled ones until it picks None."""
    while m.enabled:
        p = choose(sorted(m.enabled))
        if p is None:
            return
        m.step(p)


def drain(m: Machine, *, avoid: tuple[int, ...] = ()) -> None:
    """Run everything (lowest process first) except `avoid`, as long as anything can run."""
    run_while(m, lambda en: next((p for p in en if p not in avoid), None))


def bytes_of(m: Machine, rank: int, window: str, start: int = 0, stop: int | None = None
             ) -> np.ndarray:
    assert m.memory is not None
    arr = m.memory.arrays[(rank, window)]
    return arr[start:stop if stop is not None else arr.size]


def init_of(setup: Setup, rank: int, window: str, start: int = 0, stop: int | None = None
            ) -> np.ndarray:
    arr = setup.image[(rank, window)]
    return arr[start:stop if stop is not None else arr.size]


def region(window: str, start: int, stop: int, rank: int) -> RegionInst:
    return RegionInst(window, start, stop, rank)


def codes(m: Machine) -> list[str]:
    return sorted(f.diagnostic.code for f in m.findings)
