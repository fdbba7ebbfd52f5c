"""Run-time values at instantiation (language v2 §3): symbolic, bounded by `require`.

A `load(x[i])` is only known on the device.  When a protocol is instantiated for
the checker, a load evaluates to an `Rt`: a linear form `c + sum(k_i * atom_i)`
over `Atom`s (an element of the initial contents, or an opaque sub-expression such
as a product of two run-time values) together with its interval `[lo, hi]`
(`None`: unbounded on that side).  Arithmetic with ints and other `Rt`s builds new
forms; intervals follow (interval arithmetic, exact for sums of distinct atoms).

Texts (`Rt.text()`, `Atom.text`) are Python expressions with the fewest parentheses
that keep their meaning (`2048 * (x % 2)`, not `2048 * x % 2`): each atom knows the
precedence of its text (`Atom.prec`, the levels of `syntax.printer`).

Two forms with the same atoms and coefficients are the same value whatever the
contents: that is how the checker proves that `dst` and `src` of a put have equal
run-time lengths, or that a run-time `expected` equals the bytes counted.

A run-time value never decides control flow: `bool(rt)` raises `EvalError` (E004)
unless the interval decides it (`0 <= n` when `n >= 0` is known).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from ccogen.ir.evalerror import EvalError
from ccogen.source import Span

Bound = int | None

# the precedence levels of `syntax.printer`: a comparison, `+`/`-`, `*`/`//`/`%`, unary
# minus, an atom (a name, an element, a call)
CMP, ADD, MUL, UNARY, ATOM = 5, 6, 7, 8, 10


@dataclass(frozen=True, slots=True)
class Atom:
    """One unknown: element `index` of `window` on `rank` before the first kernel
    (`key[0] == "cell"`), or an opaque sub-expression (`key[0] == "op"`)."""

    key: tuple[object, ...]
    lo: Bound
    hi: Bound
    text: str
    # for code generation (not part of the identity): `read` is the (window, rank,
    # element) a `load` reads on the device (the cell the key names may be where that
    # element's value came from); `tree` how an opaque atom is computed: ("mul", a, b),
    # ("mulf", a, x), ("addf", a, x), ("div", a, k), ("mod", a, k), ("cmp", op, a, b),
    # ("min" | "max", forms), over `Rt` forms `a`, `b` and numbers `x`, `k`
    read: tuple[str, int, int] | None = field(default=None, compare=False)
    tree: tuple[object, ...] | None = field(default=None, compare=False)
    prec: int = field(default=ATOM, compare=False)  # of `text`: CMP, ADD, MUL or ATOM

    @property
    def cell(self) -> tuple[str, int, int] | None:
        """(window, rank, element) of an initial-contents atom."""
        if self.key[0] != "cell":
            return None
        return self.key[1], self.key[2], self.key[3]  # type: ignore[return-value]


def cell_atom(window: str, rank: int, index: int, lo: Bound, hi: Bound,
              read: tuple[str, int, int] | None = None) -> Atom:
    return Atom(("cell", window, rank, index), lo, hi, f"{window}@{rank}[{index}]",
                read=read or (window, rank, index))


def _opaque(lo: Bound, hi: Bound, text: str, deps: Iterable[Atom],
            tree: tuple[object, ...] | None = None, prec: int = ATOM) -> Rt:
    """An unknown made of others (a product, a comparison, `min`...): named by its text,
    so that the same expression of the same elements is the same unknown; `tree` says
    how it is computed (`Atom.tree`), `prec` the precedence of the text."""
    atom = Atom(("op", text), lo, hi, text, tree=tree, prec=prec)
    out = Rt.__new__(Rt)
    out.terms, out.const, out.lo, out.hi, out._text = {atom: 1}, 0, lo, hi, None
    return out


def _wrap(text: str, prec: int, need: int) -> str:
    """`text` in parentheses when its precedence is below what its place needs."""
    return f"({text})" if prec < need else text


def _mul_bound(a: Bound, b: Bound) -> Bound:
    return None if a is None or b is None else a * b


class Rt:
    """A run-time integer: `const + sum(coef * atom)`, with its interval."""

    __slots__ = ("_text", "const", "hi", "lo", "terms")

    def __init__(self, terms: dict[Atom, int], const: int) -> None:
        self.terms = terms if all(terms.values()) else {a: k for a, k in terms.items() if k}
        self.const = const
        self._text: str | None = None  # `text()`, once asked (an Rt never changes)
        lo: Bound = const
        hi: Bound = const
        for atom, k in self.terms.items():
            a_lo, a_hi = (atom.lo, atom.hi) if k > 0 else (atom.hi, atom.lo)
            lo = None if lo is None or a_lo is None else lo + k * a_lo
            hi = None if hi is None or a_hi is None else hi + k * a_hi
        self.lo, self.hi = lo, hi

    # ------------------------------------------------------------------ facts
    @property
    def bounded(self) -> bool:
        return self.lo is not None and self.hi is not None

    def atoms(self) -> list[Atom]:
        return list(self.terms)

    def unbounded_atoms(self) -> list[Atom]:
        return [a for a in self.terms if a.lo is None or a.hi is None]

    def same(self, other: Rt | int) -> bool:
        """Equal for every contents: the same linear form."""
        o = lift(other)
        return o.const == self.const and o.terms == self.terms

    def __repr__(self) -> str:
        return f"Rt({self.text()}, [{self.lo}, {self.hi}])"

    def text(self) -> str:
        if self._text is None:
            self._text = self._print()
        return self._text

    def _print(self) -> str:
        if self.const == 0 and len(self.terms) == 1:
            (atom, k), = self.terms.items()
            if k == 1:
                return atom.text
        parts = []
        for atom, k in sorted(self.terms.items(), key=lambda t: t[0].text):
            parts.append(_wrap(atom.text, atom.prec, ADD + 1) if k == 1
                         else f"{k} * {_wrap(atom.text, atom.prec, UNARY)}")
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts).replace("+ -", "- ")

    @property
    def prec(self) -> int:
        """The precedence of `text()`."""
        if not self.terms:
            return UNARY if self.const < 0 else ATOM
        if len(self.terms) > 1 or self.const:
            return ADD
        (atom, k), = self.terms.items()
        return atom.prec if k == 1 else MUL

    def wrapped(self, need: int) -> str:
        """`text()`, in parentheses where an operand of precedence `need` must be."""
        return _wrap(self.text(), self.prec, need)

    # ------------------------------------------------------------------ arithmetic
    def __add__(self, other: object) -> Rt:
        if isinstance(other, float):
            return _opaque(None, None, f"{self.wrapped(ADD)} + {other!r}", self.terms,
                           ("addf", self, other), ADD)
        if not isinstance(other, int | Rt):
            return NotImplemented
        o = lift(other)
        terms = dict(self.terms)
        for a, k in o.terms.items():
            terms[a] = terms.get(a, 0) + k
        return Rt(terms, self.const + o.const)

    __radd__ = __add__

    def __neg__(self) -> Rt:
        return Rt({a: -k for a, k in self.terms.items()}, -self.const)

    def __pos__(self) -> Rt:
        return self

    def __sub__(self, other: object) -> Rt:
        if not isinstance(other, int | Rt):
            return NotImplemented
        return self + (-lift(other))

    def __rsub__(self, other: object) -> Rt:
        if not isinstance(other, int | Rt):
            return NotImplemented
        return lift(other) + (-self)

    def __mul__(self, other: object) -> Rt:
        if isinstance(other, float):
            return _opaque(None, None, f"{self.wrapped(MUL)} * {other!r}", self.terms,
                           ("mulf", self, other), MUL)
        if isinstance(other, bool | int):
            k = int(other)
            return Rt({a: c * k for a, c in self.terms.items()}, self.const * k)
        if not isinstance(other, Rt):
            return NotImplemented
        if not other.terms:
            return self * other.const
        if not self.terms:
            return other * self.const
        corners = [_mul_bound(a, b) for a in (self.lo, self.hi) for b in (other.lo, other.hi)]
        known = [c for c in corners if c is not None]
        lo = min(known) if len(known) == 4 else None
        hi = max(known) if len(known) == 4 else None
        return _opaque(lo, hi, f"{self.wrapped(MUL)} * {other.wrapped(UNARY)}",
                       [*self.terms, *other.terms], ("mul", self, other), MUL)

    __rmul__ = __mul__

    def __floordiv__(self, other: object) -> Rt:
        if isinstance(other, int) and other > 0:
            lo = None if self.lo is None else self.lo // other
            hi = None if self.hi is None else self.hi // other
            return _opaque(lo, hi, f"{self.wrapped(MUL)} // {other}", self.terms,
                           ("div", self, other), MUL)
        raise EvalError("a run-time value divided by a run-time or non-positive number",
                        None, code="E004", help="divide by a positive static number")

    def __mod__(self, other: object) -> Rt | int:
        if isinstance(other, int) and other > 0:
            if self.lo is not None and self.hi is not None and self.lo >= 0 and self.hi < other:
                return self
            return _opaque(0, other - 1, f"{self.wrapped(MUL)} % {other}", self.terms,
                           ("mod", self, other), MUL)
        raise EvalError("a run-time value modulo a run-time or non-positive number",
                        None, code="E004", help="take the modulo of a positive static number")

    def __rfloordiv__(self, other: object) -> Rt:
        raise EvalError("division by a run-time value", None, code="E004",
                        help="divide by a static number")

    __rmod__ = __rfloordiv__

    def __pow__(self, other: object) -> Rt:
        raise EvalError("`**` of a run-time value", None, code="E004",
                        help="multiply instead")

    __rpow__ = __pow__

    # ------------------------------------------------------------------ comparisons
    def _cmp(self, other: object, op: str) -> bool | Rt:
        if not isinstance(other, int | Rt):
            return NotImplemented
        if other.__class__ is int and self.const == 0 and len(self.terms) == 1:
            (atom, k), = self.terms.items()  # the common case: one element against a number
            if k == 1:
                return _decide_atom(op, atom, atom.read, other)
        d = self - lift(other)  # decide `d op 0`
        lo, hi = d.lo, d.hi
        decided: bool | None = None
        if op == "<":
            decided = True if hi is not None and hi < 0 else (
                False if lo is not None and lo >= 0 else None)
        elif op == "<=":
            decided = True if hi is not None and hi <= 0 else (
                False if lo is not None and lo > 0 else None)
        elif op == ">":
            decided = True if lo is not None and lo > 0 else (
                False if hi is not None and hi <= 0 else None)
        elif op == ">=":
            decided = True if lo is not None and lo >= 0 else (
                False if hi is not None and hi < 0 else None)
        elif op in ("==", "!="):
            if not d.terms:
                decided = (d.const == 0) == (op == "==")
            elif (lo is not None and lo > 0) or (hi is not None and hi < 0):
                decided = op == "!="
        if decided is not None:
            return decided
        return _opaque(0, 1, f"{self.wrapped(ADD)} {op} {lift(other).wrapped(ADD)}",
                       [*self.terms, *lift(other).terms], ("cmp", op, self, lift(other)), CMP)

    def __lt__(self, other: object) -> bool | Rt:  # type: ignore[override]
        return self._cmp(other, "<")

    def __le__(self, other: object) -> bool | Rt:
        return self._cmp(other, "<=")

    def __gt__(self, other: object) -> bool | Rt:
        return self._cmp(other, ">")

    def __ge__(self, other: object) -> bool | Rt:
        return self._cmp(other, ">=")

    def __eq__(self, other: object) -> bool | Rt:  # type: ignore[override]
        return self._cmp(other, "==")

    def __ne__(self, other: object) -> bool | Rt:  # type: ignore[override]
        return self._cmp(other, "!=")

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self) -> bool:
        if self.lo is not None and self.lo == self.hi:
            return self.lo != 0
        if (self.lo is not None and self.lo > 0) or (self.hi is not None and self.hi < 0):
            return True
        raise EvalError(f"a run-time value (`{self.text()}`) decides control flow", None,
                        "only known on the device", code="E004",
                        help="run-time values may size regions, bound loops and set "
                             "`expected=`; whether an op exists must stay static")

    def __index__(self) -> int:
        raise EvalError(f"a run-time value (`{self.text()}`) where a static integer is needed",
                        None, code="E004")


@lru_cache(maxsize=1 << 16)
def _decide_atom(op: str, atom: Atom, read: tuple[str, int, int] | None,
                 value: int) -> bool | Rt:
    """`atom op value`, one answer per question: a MoE instance compares each routing
    entry with every rank once per warp, clearing copy and weight (~10^6 times).  `read`
    (`atom.read`, not part of an atom's identity) is part of the question: the same
    initial element read where a put landed it (`peer_ntok[p]` on me) and where it was
    written (`ntok` on p) must print two different loads."""
    return _decide(op, atom.lo, atom.hi, value, atom,
                   f"{_wrap(atom.text, atom.prec, ADD)} {op} {value}")


def _decide(op: str, lo: Bound, hi: Bound, value: int, atom: Atom, text: str) -> bool | Rt:
    """`atom op value` for an atom in [lo, hi]: decided, or a run-time truth."""
    a = None if lo is None else lo - value
    b = None if hi is None else hi - value
    decided: bool | None = None
    if op == "<":
        decided = True if b is not None and b < 0 else False if a is not None and a >= 0 else None
    elif op == "<=":
        decided = True if b is not None and b <= 0 else False if a is not None and a > 0 else None
    elif op == ">":
        decided = True if a is not None and a > 0 else False if b is not None and b <= 0 else None
    elif op == ">=":
        decided = True if a is not None and a >= 0 else False if b is not None and b < 0 else None
    elif (a is not None and a > 0) or (b is not None and b < 0):
        decided = op == "!="
    elif a == 0 and b == 0:
        decided = op == "=="
    if decided is not None:
        return decided
    return _opaque(0, 1, text, (atom,), ("cmp", op, Rt({atom: 1}, 0), lift(value)), CMP)


def lift(v: int | Rt) -> Rt:
    return v if isinstance(v, Rt) else Rt({}, int(v))


def is_rt(v: object) -> bool:
    return isinstance(v, Rt)


def rt_sum(values: Sequence[int | Rt]) -> int | Rt:
    """`sum(values)` in one step (a long sum of run-time values stays linear in time)."""
    terms: dict[Atom, int] = {}
    const = 0
    for v in values:
        if isinstance(v, Rt):
            const += v.const
            for a, k in v.terms.items():
                terms[a] = terms.get(a, 0) + k
        else:
            const += v
    return Rt(terms, const)


def rt_min_max(func: str, values: Sequence[int | Rt]) -> int | Rt:
    """`min`/`max` of several values, some run-time: an opaque value bounded by both."""
    forms = [lift(v) for v in values]
    if all(not f.terms for f in forms):
        pick = min if func == "min" else max
        return pick(f.const for f in forms)
    los, his = [f.lo for f in forms], [f.hi for f in forms]
    if func == "min":
        lo = None if None in los else min(x for x in los if x is not None)
        hi = min((x for x in his if x is not None), default=None)
    else:
        lo = max((x for x in los if x is not None), default=None)
        hi = None if None in his else max(x for x in his if x is not None)
    deps = [a for f in forms for a in f.terms]
    return _opaque(lo, hi, f"{func}({', '.join(f.text() for f in forms)})", deps,
                   (func, tuple(forms)))


def span_of(exc: EvalError, span: Span | None) -> EvalError:
    """`exc` located at `span` when it has no place of its own (raised inside `Rt`)."""
    if exc.span is None:
        exc.span = span
    return exc


__all__ = ["Atom", "Rt", "cell_atom", "is_rt", "lift", "rt_min_max", "rt_sum", "span_of"]
