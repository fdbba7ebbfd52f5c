"""Run-time values on `nccl-cft` (language v2 §3, §4): what the fabric engine allows.

The shared machinery prints them (`codegen.rtexpr`, `codegen.require`,
templates/common/_runtime.j2); this module decides what CFT can do with them:

- A `load` reads an element of this rank (its windows, its local buffers) with a plain
  load (`ccogen_ld` in templates/nccl_cft).  A peer's element cannot be read: CFT gives
  the SMs no pointer into a peer's window, and ccogen does not turn a `load` into a
  blocking `cft.get` round trip.  Refused (E042), naming the alternative.
- A transfer through the fabric engine (`put`, `get`) moves 16-byte-aligned multiples
  of 16 bytes, from and to a 16-byte-aligned staging buffer.  With run-time bounds, both
  regions' offsets and the length must be multiples of 16 for *every* value: each is a
  linear form over the loaded elements (`ir.runtime.Rt`), a multiple of 16 when its
  constant and every coefficient are (rows of `hit * hidden` bf16 elements with
  `hidden % 8 == 0`).  Otherwise E042 says which form and how to make it one.  A local
  `copy` (SM loads and stores) takes any run-time bounds.
- A length of 0 (a token routed nowhere) issues no fabric operation: the NCCL
  documentation says nothing of zero-byte CFT operations, so the staged write and read
  return before constructing one (templates/nccl_cft, `ccogen_cft_write`).  A signal the
  put carries is a step of its own (the fenced flag update) and still rings; a counted
  put of 0 bytes adds nothing to the counter, as the run-time total counts it.
- `wait_count(C, expected=<run-time>)` becomes `rtwaitcounted`: `cft.waitCounted` at CTA
  scope on the total computed on the device (an acquire spin plus the Fabric -> Generic
  acquire fence at warp and thread scope, as the static counted waits), then the bytes
  are taken off the counter.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from ccogen.codegen.steps import Step, StepKind
from ccogen.codegen.unsupported import Unsupported
from ccogen.ir.instance import Instance, OpInst, RegionInst
from ccogen.ir.opkind import OpKind
from ccogen.ir.runtime import Atom, Rt

GRANULE = 16  # CFT: operands 16-byte aligned, lengths multiples of 16 bytes
FABRIC = frozenset({OpKind.PUT, OpKind.GET})


def _forms(values: object) -> Iterator[Rt]:
    """Every `Rt` in `values` (a value, or nested tuples of them)."""
    if isinstance(values, Rt):
        yield values
    elif isinstance(values, tuple | list):
        for v in values:
            yield from _forms(v)


def _reads(value: Rt) -> Iterator[tuple[str, int, int]]:
    """The (window, rank, element) every `load` in `value` reads, trees included."""
    stack: list[Atom] = list(value.terms)
    while stack:
        atom = stack.pop()
        if atom.tree is not None:
            for form in _forms(atom.tree[1:]):
                stack.extend(form.terms)
        elif atom.read is not None:
            yield atom.read


def _op_forms(op: OpInst) -> list[Rt]:
    regions = [r for r in (op.dst, op.src, *op.srcs) if r is not None]
    return list(_forms((tuple(r.runtime for r in regions if r.runtime is not None),
                        op.expected_rt, tuple(op.weights_rt))))


def _peer_load(instance: Instance, op: OpInst) -> None:
    for form in _op_forms(op):
        for window, rank, index in _reads(form):
            if rank == op.rank or instance.is_buffer(window):
                continue
            raise Unsupported(
                f"`load({window}@{rank}[{index}])` reads an element of rank {rank}: a "
                "`nccl-cft` kernel cannot load from a peer's window (CFT gives the SMs no "
                "pointer into it, only fabric transfers through shared memory); have rank "
                f"{rank} `put` the value into a window of rank {op.rank} with "
                "`signal=\"remote\"`, `wait_signal` for it, then `load` it locally; or "
                "generate for `nccl-lsa` or `nvshmem`, which load a peer's element on the "
                "device", op.span)


def _multiple(value: object) -> bool:
    """`value` (an int or an `Rt`) is a multiple of GRANULE for every contents."""
    if isinstance(value, Rt):
        return value.const % GRANULE == 0 and all(k % GRANULE == 0
                                                  for k in value.terms.values())
    return isinstance(value, int) and value % GRANULE == 0


def _text(value: object) -> str:
    return value.text() if isinstance(value, Rt) else str(value)


def _granular(op: OpInst) -> None:
    """A fabric transfer with run-time bounds moves whole 16-byte granules."""
    pairs: list[tuple[str, RegionInst]] = [("dst", op.dst), ("src", op.src)]  # type: ignore[list-item]
    for label, region in pairs:
        if region is None or region.runtime is None:
            continue
        start, stop = region.runtime
        length = stop - start  # type: ignore[operator]
        for what, value in ((f"`{label}` starts at byte", start), ("its length is", length)):
            if _multiple(value):
                continue
            span = getattr(getattr(op.op, label, None), "span", None) or op.span
            raise Unsupported(
                f"`{op.kind}` of run-time bounds on `nccl-cft`: {what} `{_text(value)}` of "
                f"`{region.window}`, which is not a multiple of {GRANULE} for every value; "
                f"the fabric engine moves 16-byte-aligned multiples of {GRANULE} bytes. "
                f"Count in units of {GRANULE} bytes (e.g. rows whose byte size is a multiple "
                f"of {GRANULE}: `n * row` elements), or generate for `nccl-lsa` or `nvshmem`, "
                "which move any run-time length", span)


def check_runtime(instance: Instance) -> None:
    """Refuse, at the first op that needs it, what CFT cannot do with run-time values."""
    if not instance.runtime:
        return
    for op in (o for ops in instance.ranks for o in ops):
        _peer_load(instance, op)
        if op.kind in FABRIC:
            _granular(op)


def runtime_counted(steps: tuple[Step, ...]) -> tuple[Step, ...]:
    """A run-time counted wait (`rtwait`) goes through CFT's counted wait."""
    return tuple(replace(s, kind=StepKind.RTWAITCOUNTED) if s.kind is StepKind.RTWAIT else s
                 for s in steps)


__all__ = ["GRANULE", "check_runtime", "runtime_counted"]
