"""C spellings shared by CUDA C++ and HIP: literals, and run-time values as C expressions.

The passes decide numbers and truths; `u64`, `i64` and `cbool` are the only place their
C text is written (`spell.hip` builds mori-sdma's calls from them).  The element types'
C names are `codegen.reduce.CTYPES` (HIP renames the half types: `spell.hip.HIP_CTYPES`).

Run-time values (language v2 §3; `CExpr`, formerly `codegen.rtexpr`, which re-exports it
for the SM passes that import it from there).

A symbolic instance gives every run-time value as an `Rt` (`ccogen.ir.runtime`): a linear
form over atoms, each an element a `load` reads (`Atom.read`: window, rank, element) or an
opaque combination of other forms (`Atom.tree`: a product, a comparison, `min`/`max`...).
`CExpr` prints one as a C++ expression the kernel evaluates where the op runs:

* an element is `ccogen_ld<T>(c, peer, offset)` (templates/common/_runtime.j2), read from
  my heap, a peer's heap (LSA pointer / `nvshmem_ptr`, else NVSHMEM's get) or a local
  buffer, converted to `int64_t` (a float element to `double`: `reduce` weights, a
  `require` on a float buffer; f16 and bf16 read through `ccogen_ld_f16`/`_bf16`);
* sums, products and comparisons are C's, in `int64_t` (or `double` once a float takes
  part); `//` and `%` by a positive number floor like Python's (`ccogen_floordiv`,
  `ccogen_floormod`); `min`/`max` are `ccogen_rtmin`/`ccogen_rtmax`.

Reading the element where the op runs is what `load` means: "read by the issuer when it
gets there".  Every run-time value is read from device memory at every launch, so a
CUDA graph that captured the launches once replays them with the current contents.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from ccogen.codegen.layout import HeapLayout
from ccogen.codegen.reduce import CTYPES
from ccogen.codegen.unsupported import Unsupported
from ccogen.ir.dtype import DType
from ccogen.ir.instance import Instance, RegionInst
from ccogen.ir.runtime import Atom, Rt
from ccogen.source import Span


def u64(value: int) -> str:
    """An unsigned 64-bit literal (heap offsets, byte counts, signal values)."""
    return f"{value}ULL"


def i64(value: int) -> str:
    """A signed 64-bit literal (the start and length of a run-time region)."""
    return f"{value}LL"


def cbool(value: object) -> str:
    return "true" if value else "false"


_CMP = {"<", "<=", ">", ">=", "==", "!="}
_DIGITS = re.compile(r"(\d+)")
_HALF = {DType.BF16: "ccogen_ld_bf16", DType.F16: "ccogen_ld_f16"}


@lru_cache(maxsize=1 << 16)
def natural(text: str) -> tuple[object, ...]:
    """`text` as a sort key whose digit runs compare as numbers: `x[9]` before `x[10]`, so
    that the terms of a sum print in element order, the same from one token to the next
    (a folded loop's terms, codegen.reroll) and as the source wrote them (`for j in ...`)."""
    return tuple(int(part) if i % 2 else part for i, part in enumerate(_DIGITS.split(text)))


_SHARED: list[object] = [None, None, {}]  # (instance, layout, {rank: memo}): CExpr.shared


def _memo_key(atom: Atom) -> object:
    """What a printed atom is: an element with the place it is read (`Atom.read`, not part
    of the atom's identity), an opaque atom with its own tree (the key holds the atom, so
    the tree's id stays its own; `runtime._decide_atom` shares one per question)."""
    return (atom, atom.read) if atom.tree is None else (atom, id(atom.tree))


def _unsupported(message: str, span: Span | None) -> Exception:
    return Unsupported(message, span)


@dataclass(frozen=True)
class CExpr:
    """Prints run-time values of `instance` for code running on rank `me`."""

    instance: Instance
    layout: HeapLayout
    me: int
    span: Span | None = None
    # printed atoms of rank `me` (codegen.plan shares one per rank and instance): a MoE
    # kernel prints each routing entry's load and comparison in many ops.  Keyed by where
    # the atom is read (`_memo_key`): an atom's identity is the initial element, but the
    # same element may be read where it was written and where a put landed it
    memo: dict[object, str] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def shared(cls, instance: Instance, layout: HeapLayout, me: int,
               span: Span | None = None) -> CExpr:
        """A printer whose memo is shared by every op of rank `me` of this instance and
        layout (the last pair asked for is kept: one code generation at a time)."""
        if _SHARED[0] is not instance or _SHARED[1] is not layout:
            _SHARED[:] = [instance, layout, {}]
        memos: dict[int, dict[object, str]] = _SHARED[2]  # type: ignore[assignment]
        return cls(instance, layout, me, span, memos.setdefault(me, {}))

    def value(self, v: object) -> str:
        """`v` (an int, a float or an `Rt`) as a C expression."""
        if isinstance(v, bool):
            return "1" if v else "0"
        if isinstance(v, int):
            return f"{v}LL"
        if isinstance(v, float):
            return repr(v)
        if not isinstance(v, Rt):
            raise _unsupported(f"a run-time value of an unexpected kind ({v!r})", self.span)
        parts: list[str] = []
        terms = list(v.terms.items())
        if len(terms) > 1:  # (one term, the common case: nothing to order)
            terms.sort(key=lambda t: natural(t[0].text))
        for atom, k in terms:
            term = self.atom(atom)
            parts.append(term if k == 1 else f"{k}LL * {term}")
        if v.const or not parts:
            parts.append(f"{v.const}LL")
        return parts[0] if len(parts) == 1 else "(" + " + ".join(parts) + ")"

    def atom(self, atom: Atom) -> str:
        key = _memo_key(atom)
        out = self.memo.get(key)
        if out is None:
            out = self.memo[key] = self._atom(atom)
        return out

    def _atom(self, atom: Atom) -> str:
        if atom.tree is not None:
            return self.tree(atom.tree)
        if atom.read is None:
            raise _unsupported(f"the run-time value `{atom.text}` cannot be read on the device "
                              "(an element several ops write)", self.span)
        return self.element(*atom.read)

    def element(self, window: str, rank: int, index: int) -> str:
        dtype = self.instance.dtype(window)
        region = RegionInst(window, index * dtype.size, (index + 1) * dtype.size, rank)
        peer, off = self.layout.address(region, self.me)
        if dtype in _HALF:  # read as 16 bits, widened through float
            return f"static_cast<double>({_HALF[dtype]}(c, {peer}, {off}ULL))"
        wide = "double" if dtype.is_float else "int64_t"
        return f"static_cast<{wide}>(ccogen_ld<{CTYPES[dtype]}>(c, {peer}, {off}ULL))"

    def integral(self, v: object) -> bool:
        """`v` is computed in integers (no float element, weight or constant in it)."""
        if isinstance(v, bool | int):
            return True
        return isinstance(v, Rt) and all(self._integral_atom(atom) for atom in v.terms)

    def _integral_atom(self, atom: Atom) -> bool:
        tree = atom.tree
        if tree is None:
            return atom.read is not None and not self.instance.dtype(atom.read[0]).is_float
        head = tree[0]
        if head in ("mulf", "addf"):
            return False
        if head == "mul":
            return self.integral(tree[1]) and self.integral(tree[2])
        if head in ("min", "max"):
            forms = tree[1]
            assert isinstance(forms, tuple)
            return all(self.integral(f) for f in forms)
        if head in ("div", "mod"):
            return self.integral(tree[1])
        return True  # a comparison: 0 or 1

    def tree(self, tree: tuple[object, ...]) -> str:
        head = tree[0]
        if head == "mul":
            a, b = tree[1], tree[2]
            for flag, other in ((a, b), (b, a)):
                if _flag(flag) and self.integral(other):  # a 0/1 guard (`t < n`): what it
                    # multiplies is not read past it (integers only: `NaN * 0` stays C's)
                    return f"({self.value(flag)} ? {self.value(other)} : 0LL)"
            return f"({self.value(a)} * {self.value(b)})"
        if head == "mulf":
            return f"({self.value(tree[1])} * {self.value(tree[2])})"
        if head == "addf":
            return f"({self.value(tree[1])} + {self.value(tree[2])})"
        if head == "div":
            return f"ccogen_floordiv({self.value(tree[1])}, {self.value(tree[2])})"
        if head == "mod":
            return f"ccogen_floormod({self.value(tree[1])}, {self.value(tree[2])})"
        if head == "cmp":
            op = tree[1]
            assert isinstance(op, str) and op in _CMP
            return f"static_cast<int64_t>({self.value(tree[2])} {op} {self.value(tree[3])})"
        if head in ("min", "max"):
            forms = tree[1]
            assert isinstance(forms, tuple)
            out = self.value(forms[0])
            for f in forms[1:]:
                out = f"ccogen_rt{head}({out}, {self.value(f)})"
            return out
        raise _unsupported(f"a run-time value this target cannot compute ({head})", self.span)


def _flag(v: object) -> bool:
    """`v` is one comparison (0 or 1): a guard such as a loop's `t < n` (language
    reference §14, "Loops to a run-time count"), printed as `cond ? x : 0` so that a
    guarded length does not read its other operand's elements where the guard is 0 (the
    rows past a run-time count may lie past a caller's tensor)."""
    if not isinstance(v, Rt) or v.const != 0 or len(v.terms) != 1:
        return False
    (atom, k), = v.terms.items()
    return k == 1 and atom.tree is not None and atom.tree[0] == "cmp"


def runtime_bounds(region: RegionInst) -> tuple[object, object] | None:
    """(start, stop) in bytes of a region with run-time bounds (None: static)."""
    return region.runtime


__all__ = ["CExpr", "cbool", "i64", "natural", "runtime_bounds", "u64"]
