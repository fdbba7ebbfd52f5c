"""Contents that satisfy `require`, drawn afresh every epoch of `ccogen run` (language v2 §3).

A protocol with run-time values cannot run on random bytes: its counts must stay within
`require` (a count above `cap` writes past its region), and a routing table must say
what `require` says it says.  `ccogen run` therefore fills every window and buffer of
every rank, each epoch, with contents the simulator's drawing code gives
(`ccogen.sim.runtime.draw`), and checks `ensure` against the instance of *those*
contents (`instantiate(..., contents=)`: every run-time bound concrete):

* epoch 0 draws `low` (every bounded element at its lower bound: every count 0),
  epoch 1 `high` (every count at its bound; every token to the highest rank), then
  even epochs `mixed-E` (per element the lower bound, the upper bound or a value between:
  skewed routings, ranks that receive nothing) and odd ones `interior-E` (uniform
  between the bounds).  A draw that no contents satisfy falls back to `mixed-E`.
* The draw depends only on (seed, epoch, nranks, parameters), so every rank gets the
  same contents and checks without talking to the others; each fills its own windows
  and buffers from them and checks its own `ensure` lines.  The launcher draws every
  epoch once, in parallel, before the ranks start (`precompute`); a rank started by
  torchrun / mpirun draws its epochs itself.

The kernels themselves are the ones compiled once for the symbolic instance: they read
the counts on the device, whatever the epoch's draw.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ccogen.rt.data import CheckSpec, check_specs

if TYPE_CHECKING:
    import numpy as np

    from ccogen.ir.instance import Instance
    from ccogen.ir.nodes import Protocol


@dataclass(frozen=True)
class DrawSpec:
    """What a rank needs to draw an epoch's contents: plain data, pickled to workers."""

    protocol: Protocol
    nranks: int
    params: tuple[tuple[str, Any], ...]  # integer and dtype parameters (dtypes as names)
    seed: int

    @classmethod
    def of(cls, instance: Instance, seed: int) -> DrawSpec | None:
        """The spec of a run-time instance (None: no run-time values)."""
        if not instance.runtime:
            return None
        params = (*instance.params, *((k, v.value) for k, v in instance.dtype_params))
        return cls(instance.protocol, instance.nranks, params, seed)


@dataclass(frozen=True)
class EpochDraw:
    """One epoch's contents (`(rank, name)` -> raw bytes) and `ensure` comparisons."""

    label: str
    arrays: dict[tuple[int, str], np.ndarray]
    checks: tuple[CheckSpec, ...]


def which(epoch: int) -> str:
    """The draw of `epoch` (module doc)."""
    if epoch == 0:
        return "low"
    if epoch == 1:
        return "high"
    return f"mixed-{epoch}" if epoch % 2 == 0 else f"interior-{epoch}"


def draw_epoch(spec: DrawSpec, epoch: int, rank: int | None = None) -> EpochDraw:
    """The contents and checks of `epoch` (the checks of `rank` only when given: a rank
    that draws its own epochs); RunError when no contents can be drawn or the instance of
    the drawn contents has errors (a bug: the checker accepted the protocol)."""
    from ccogen.rt.prepare import checks_for, reads_remote_finals, unrolled, vectorised_checks
    from ccogen.sim.runtime import fill_regions

    params = dict(spec.params)
    # a rank's own checks, unless some rank reads another's finals (launch: the exchange
    # is decided over every rank's checks)
    ranks = None if rank is None or reads_remote_finals(spec.protocol) else [rank]
    if ranks is not None and not unrolled():
        # the rank's own memories and what `require` reads, then the parts of the other
        # ranks' memories its `init(...)` regions read (ccogen.sim.runtime.draw)
        contents, label = _draw(spec, epoch, rank)
        checks = vectorised_checks(spec.protocol, spec.nranks, params, contents, ranks)
        if checks is not None:
            read = [(r.rank, r.window, r.start, r.stop) for c in checks for r in c.regions()
                    if r.init]
            fill_regions(spec.protocol, spec.nranks, params, spec.seed, contents, read)
            keys = {(r, w) for r, w, _, _ in read}
            arrays = {key: a for key, a in contents.arrays.items()
                      if key[0] == rank or key in keys}
            return EpochDraw(label, arrays, tuple(checks))
    contents, label = _draw(spec, epoch, None)
    if unrolled():  # the oracle: the checks of the unrolled instance of the contents
        return _checked(spec, contents, label, f"epoch {epoch}")[0]
    checks = checks_for(spec.protocol, spec.nranks, params, contents, ranks,
                        f"epoch {epoch}")
    arrays = contents.arrays
    if ranks is not None:  # what this rank fills and what its checks read as `init(...)`
        read_keys = {(r.rank, r.window) for c in checks for r in c.regions() if r.init}
        arrays = {key: a for key, a in arrays.items() if key[0] == rank or key in read_keys}
    return EpochDraw(label, arrays, tuple(checks))


def _draw(spec: DrawSpec, epoch: int, rank: int | None) -> tuple[Any, str]:
    """The contents of `epoch` (of `rank` only when given: `ccogen.sim.runtime.draw`)."""
    from ccogen.sim.runtime import draw

    params = dict(spec.params)
    contents, label = draw(spec.protocol, spec.nranks, params, which(epoch), spec.seed, rank)
    if contents is None:
        contents, label = draw(spec.protocol, spec.nranks, params, f"mixed-{epoch}",
                               spec.seed, rank)
    if contents is None:
        from ccogen.errors import RunError

        raise RunError(f"no contents satisfy `require` of `{spec.protocol.name}` "
                       f"(epoch {epoch}: {label})")
    return contents, label


def draw_named(spec: DrawSpec, name: str) -> tuple[EpochDraw, Instance]:
    """The draw `name` (`low`, `high`, `mixed-N`, `interior-N`: ccogen.sim.runtime.draw),
    with no fallback, and the instance of its contents (`ccogen bench` times one chosen
    draw); RunError when no contents of that draw satisfy `require`."""
    from ccogen.errors import RunError
    from ccogen.sim.runtime import draw

    contents, label = draw(spec.protocol, spec.nranks, dict(spec.params), name, spec.seed)
    if contents is None:
        raise RunError(f"no contents satisfy `require` of `{spec.protocol.name}` for the draw "
                       f"{label}")
    return _checked(spec, contents, label, f"the draw {label}")


def _checked(spec: DrawSpec, contents: Any, label: str, where: str
             ) -> tuple[EpochDraw, Instance]:
    """The draw's contents and checks, and the instance of those contents (RunError, a
    bug, when that instance has errors: the checker accepted the protocol)."""
    from ccogen.errors import RunError
    from ccogen.instantiate import instantiate
    from ccogen.limits import DEFAULT

    instance, diags = instantiate(spec.protocol, spec.nranks, dict(spec.params), DEFAULT,
                                  contents=contents)
    errors = [d for d in diags if d.is_error]
    if instance is None or errors:
        detail = "; ".join(d.message for d in errors[:3])
        raise RunError(f"{where}: the instance of the drawn contents ({label}) has "
                       f"errors: {detail} (this is a bug in ccogen: `ccogen simulate` "
                       "the protocol with the same parameters to reproduce it)")
    return EpochDraw(label, contents.arrays, tuple(check_specs(instance.checks))), instance


PRECOMPUTE_MAX_BYTES = 64 << 20  # drawn bytes of one epoch (every rank) kept on disk


def drawn_bytes(spec: DrawSpec) -> int:
    """The bytes of one epoch's contents, every rank's windows and buffers."""
    from ccogen.instantiate.checks import memory_bytes

    return spec.nranks * memory_bytes(spec.protocol, spec.nranks, dict(spec.params))


def precompute(spec: DrawSpec, epochs: int, directory: Path) -> bool:
    """Draw every epoch once, in parallel, into `directory/draw-E.pkl` (what `ccogen run`'s
    launcher does before spawning the ranks: each rank then loads its epoch instead of
    drawing it again, `load_epoch`).  Not when one epoch's contents exceed
    `PRECOMPUTE_MAX_BYTES` (a MoE prefill draw is GiBs, 100 epochs would not fit the
    disk): each rank then draws its epochs itself (False)."""
    directory.mkdir(parents=True, exist_ok=True)
    if drawn_bytes(spec) > PRECOMPUTE_MAX_BYTES:
        return False
    import multiprocessing
    import pickle
    from concurrent.futures import ProcessPoolExecutor
    from itertools import repeat

    workers = max(1, min(epochs, os.cpu_count() or 1, 16))
    if workers == 1:
        draws = map(draw_epoch, repeat(spec), range(epochs))
        for epoch, d in enumerate(draws):
            (directory / f"draw-{epoch}.pkl").write_bytes(pickle.dumps(d))
        return True
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        for epoch, d in enumerate(pool.map(draw_epoch, repeat(spec), range(epochs))):
            (directory / f"draw-{epoch}.pkl").write_bytes(pickle.dumps(d))
    return True


def load_epoch(spec: DrawSpec, epoch: int, directory: str, rank: int | None = None
               ) -> EpochDraw:
    """`epoch`'s draw from `precompute`'s directory, or drawn here (torchrun / mpirun, a
    draw too large to precompute), with the checks of `rank` only when given."""
    import pickle

    path = Path(directory) / f"draw-{epoch}.pkl" if directory else None
    if path is not None and path.is_file():
        loaded = pickle.loads(path.read_bytes())
        assert isinstance(loaded, EpochDraw)
        return loaded
    return draw_epoch(spec, epoch, rank)


__all__ = ["PRECOMPUTE_MAX_BYTES", "DrawSpec", "EpochDraw", "draw_epoch", "draw_named",
           "drawn_bytes", "load_epoch", "precompute", "which"]
