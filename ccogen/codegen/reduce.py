"""How a `reduce` is computed on the SMs (CUDA targets): types, weights, vector width.

`reduction(op, layout)` decides everything the device code's `ccogen_reduce_range`
(templates/common/ccogen_device.cuh.j2) is instantiated with:

* the element's C type and the accumulator's: f16 and bf16 accumulate in `float` and are
  rounded once when stored (language v2 §2); f32 in `float`; integer sums in the unsigned
  type of the element's width, so that they wrap exactly as the simulator's do
  (`ccogen.ir.values`; a signed overflow would be undefined behaviour in C++), integer
  `max`/`min` in the element type itself (a signed comparison);
* the weights as C literals of the accumulator type (an integer weight converts like the
  simulator's: through int64, wrapping);
* the vector width: 16-byte loads and stores when the destination and every heap source
  are 16-byte aligned (every heap window is 256-byte aligned,
  codegen/layout.py), else one element at a time.  A local buffer's base address is the
  caller's: the device code checks it at run time and falls back to elements when it is
  not 16-byte aligned.  16-byte vectors keep up to 8 loads in flight per thread, as copies
  do; a length that is not a multiple of 16 bytes ends with elements (the tail).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from ccogen.codegen.layout import HeapLayout
from ccogen.codegen.steps import Reduction
from ccogen.codegen.unsupported import Unsupported
from ccogen.errors import InternalError
from ccogen.ir.dtype import DType
from ccogen.ir.instance import OpInst

if TYPE_CHECKING:  # rtexpr imports this module's CTYPES
    from ccogen.codegen.rtexpr import CExpr

VECTOR = 16  # bytes of one vector load (int4)

CTYPES: dict[DType, str] = {
    DType.U8: "uint8_t", DType.I32: "int32_t", DType.U32: "uint32_t", DType.I64: "int64_t",
    DType.U64: "uint64_t", DType.F16: "__half", DType.BF16: "__nv_bfloat16", DType.F32: "float",
}
_UNSIGNED: dict[DType, str] = {DType.I32: "uint32_t", DType.I64: "uint64_t"}


def accumulator(dtype: DType, op: str) -> str:
    """The C type a `reduce` of `dtype` accumulates in: `DType.accumulator`'s, an integer
    sum in the unsigned type of its width (it wraps, where a signed overflow is undefined)."""
    acc = dtype.accumulator
    if op == "sum" and not acc.is_float:
        return _UNSIGNED.get(acc, CTYPES[acc])
    return CTYPES[acc]


def weight_literal(w: int | float, acc: str) -> str:
    """One weight as a C expression of type `acc`."""
    if acc == "float":
        return f"{float(w)!r}f"
    return f"static_cast<{acc}>({int(w)}LL)"


_KINDS = {DType.F32: "CCOGEN_F32", DType.F16: "CCOGEN_F16", DType.BF16: "CCOGEN_BF16"}


def reduction(op: OpInst, layout: HeapLayout, ctypes: dict[DType, str] = CTYPES,
              src_dtypes: tuple[DType, ...] = ()) -> tuple[tuple[int, int], Reduction]:
    """(dst address, the Reduction) of one `reduce` instance; `ctypes`: the target
    language's element types (CUDA's by default); `src_dtypes`: the sources' element
    types (a converting `reduce` where one is not `dst`'s: element by element, each
    source widened to f32 and the result rounded once, `ccogen_reducex_*`)."""
    if op.dst is None or op.reduce_op is None or op.dtype is None or not op.srcs:
        raise InternalError(f"reduce without dst, srcs, op or dtype: {op}")
    if op.dst.rank != op.rank and op.dst.window not in layout.buffers:
        raise InternalError(f"reduce into another rank's memory: {op.dst}")
    dst = layout.address(op.dst, op.rank)
    srcs = tuple(layout.address(s, op.rank) for s in op.srcs)
    kind = op.reduce_op.value
    acc = accumulator(op.dtype, kind)
    kinds = tuple(_KINDS[d] for d in src_dtypes) if any(d is not op.dtype
                                                         for d in src_dtypes) else ()
    heap = [off for peer, off in (dst, *srcs) if peer >= -1]
    aligned = all(off % VECTOR == 0 for off in heap)
    return dst, Reduction(
        op=kind, dtype=op.dtype.value, ctype=ctypes[op.dtype], acc=acc, srcs=srcs,
        weights=tuple(weight_literal(w, acc) for w in op.weights),
        vector=VECTOR if aligned and not kinds else op.dtype.size,
        elements=op.dst.size // op.dtype.size, kinds=kinds,
        widths=tuple(d.size for d in src_dtypes) if kinds else ())


def refuse_runtime_bounds(op: OpInst, target: str) -> None:
    """Unsupported for a `reduce` with run-time region bounds, on a target (`target`)
    that lowers only static ones."""
    if any(r.runtime is not None for r in (op.dst, *op.srcs) if r is not None):
        raise Unsupported(f"a `reduce` with run-time bounds is not generated for {target}: "
                          "give it static bounds (clear unused rows with a `copy` first), "
                          "or compile for nvshmem or nccl-lsa", op.span)


def runtime_bounds(op: OpInst, spec: Reduction, layout: HeapLayout,
                   cexpr: Callable[[OpInst], CExpr]
                   ) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """(`rt`, `let`) of a `reduce` whose regions have run-time bounds (a guarded row of a
    loop to a run-time count, language reference §14): the device offsets of `dst` and
    of each source (`rt_dst`, `rt_src<k>`) and the length `rt_n`, `dst`'s run-time length
    (the sources have the same, as `reduce` requires); 16-byte vectors when the static
    choice allows them and every run-time offset is a multiple of 16 on the device (the
    length need not be: the device code ends with elements).  The static fields keep the
    footprint.  A converting `reduce` counts elements of several widths: refused."""
    regions = (op.dst, *op.srcs)
    if all(r is None or r.runtime is None for r in regions):
        return (), ()
    if spec.kinds:
        raise Unsupported("a converting `reduce` (sources of another float type) with "
                          "run-time bounds is not generated yet: give it static bounds",
                          op.span)
    assert op.dst is not None
    cx = cexpr(op)
    let: list[tuple[str, str]] = []
    rt: list[tuple[str, str]] = []
    offsets: list[str] = []
    for k, region in enumerate(regions):
        assert region is not None
        name, slot = ("rt_dst", "dst_off") if k == 0 else (f"rt_src{k - 1}", f"src{k - 1}")
        if region.runtime is None or isinstance(region.runtime[0], int):
            continue  # a static start: the static offset stands
        base = layout.address(region, op.rank)[1] - region.start
        let.append((name, cx.value(region.runtime[0] + base)))  # type: ignore[operator]
        rt.append((slot, name))
        offsets.append(name)
    start, stop = op.dst.runtime if op.dst.runtime is not None else (op.dst.start, op.dst.stop)
    let.append(("rt_n", cx.value(stop - start)))  # type: ignore[operator]
    rt.append(("nbytes", "rt_n"))
    if offsets and spec.vector == VECTOR:
        rt.append(("vec", f"(({' | '.join(offsets)}) & 15ULL) == 0"))
    return tuple(rt), tuple(let)


def with_runtime_weights(op: OpInst, spec: Reduction,
                         cexpr: Callable[[OpInst], CExpr]) -> Reduction:
    """`spec` with the op's run-time weights as C expressions (`cexpr`: the target's
    printer of run-time values)."""
    if not op.weights_rt:
        return spec
    cx = cexpr(op)
    return replace(spec, weights=tuple(f"static_cast<{spec.acc}>({cx.value(w)})"
                                       for w in op.weights_rt))


__all__ = ["CTYPES", "VECTOR", "accumulator", "reduction", "refuse_runtime_bounds",
           "runtime_bounds", "weight_literal", "with_runtime_weights"]
