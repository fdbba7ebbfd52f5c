"""`launch % K` in generated code (language reference section 8): one program for every
launch of the period.

The launches of a rotating protocol have the same ops and differ only in their regions
(instantiation proves it).  The backend builds its view-model once per launch of the
period and `merge` folds them into one: every field equal across the launches stays as
it is, and an offset or a length that differs becomes a C expression of the kernel's
epoch (`c.epoch`, the launch counter: a kernel argument from `ccogen run`, counted on the
device under `Options.epoch_from_heap`, so a CUDA graph replays it with nothing from the
host), through the `rt` fields that run-time values already use.  Anything else that
differs is refused (`Unsupported`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ccogen.codegen.steps import Step
from ccogen.codegen.unsupported import Unsupported

_ROTATING = ("dst_off", "src_off", "nbytes", "value")


def by_launch(values: Sequence[int], period: int) -> str:
    """The C expression of `values[launch % period]`."""
    out = f"{values[0]}ULL"
    for e in range(period - 1, 0, -1):
        out = f"(c.epoch % {period}ULL == {e}ULL ? {values[e]}ULL : {out})"
    return out


def merge(models: Sequence[object], period: int) -> object:
    """One view-model from the models of launches 0 .. period - 1."""
    return _merge(list(models), period)


def _merge(values: list[object], period: int) -> object:
    first = values[0]
    if all(v == first for v in values[1:]):
        return first
    if isinstance(first, Step):
        return _step(values, period)  # type: ignore[arg-type]
    if dataclasses.is_dataclass(first) and not isinstance(first, type):
        changes = {f.name: _merge([getattr(v, f.name) for v in values], period)
                   for f in dataclasses.fields(first)}
        return dataclasses.replace(first, **changes)  # type: ignore[type-var]
    if isinstance(first, tuple | list) and all(
            isinstance(v, type(first)) and len(v) == len(first) for v in values):  # type: ignore[arg-type]
        merged = [_merge([v[i] for v in values], period)  # type: ignore[index]
                  for i in range(len(first))]
        return type(first)(merged)
    raise Unsupported("the launches of this `launch % K` protocol need different code, not "
                      "only other offsets (a size that changes the lowering)", None)


def _step(values: list[Step], period: int) -> Step:
    first = values[0]
    rt = dict(first.rt)
    if any(v.rt != first.rt or v.let != first.let for v in values[1:]):
        raise Unsupported("a rotating region with run-time bounds is not generated", None)
    same = {name: getattr(first, name) for name in _ROTATING}
    for name in _ROTATING:
        got = [getattr(v, name) for v in values]
        if any(g != got[0] for g in got[1:]) and name not in rt:
            rt[name] = by_launch(got, period)
    reduction = first.reduction
    if reduction is not None:
        others = [v.reduction for v in values]
        if any(r is None or (r.srcs and [p for p, _ in r.srcs] != [p for p, _ in reduction.srcs])
               for r in others):
            raise Unsupported("a rotating `reduce` changes its peers", None)
        for i in range(len(reduction.srcs)):
            offs = [r.srcs[i][1] for r in others]  # type: ignore[union-attr]
            if any(o != offs[0] for o in offs[1:]):
                rt[f"src{i}"] = by_launch(offs, period)
        # the widest load every launch's addresses allow
        vector = min(r.vector for r in others)  # type: ignore[union-attr]
        reduction = dataclasses.replace(reduction, vector=vector)
        if any(dataclasses.replace(r, srcs=reduction.srcs, vector=vector)  # type: ignore[type-var]
               != reduction for r in others):
            raise Unsupported("a rotating `reduce` changes more than its offsets", None)
    rest = [dataclasses.replace(v, **same, vec=first.vec, reduction=reduction) for v in values]
    if any(r != rest[0] for r in rest[1:]):
        raise Unsupported("the launches of this `launch % K` protocol need different code "
                          f"for a `{first.kind.value}` step, not only other offsets", None)
    # 16-byte vectors only where every launch's offsets allow them
    return dataclasses.replace(first, rt=tuple(rt.items()), vec=all(v.vec for v in values))


__all__ = ["by_launch", "merge"]
