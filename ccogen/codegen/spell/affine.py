"""C spelling of an integer affine in a loop's trip counter (`steps.Affine`).

`const + coef * t + alt * (t % 2)` is printed the way `codegen.reroll` has always printed
a literal that moves from one trip to the next: a 64-bit unsigned slot (an offset, a
length, a value: `{v}ULL` when static) as `static_cast<uint64_t>(vLL + dLL * t)`, a plain
`int` slot (a peer, a line) as `(v + dLL * t)`; a term whose coefficient is 0 is left out,
and a constant is the static literal (`vULL`, `v`).
A leaf module (it imports nothing of ccogen), so that `codegen.steps` can print through it.
"""

from __future__ import annotations


def terms(coef: int, alt: int, var: str = "t") -> str:
    """The moving terms, ` + coefLL * var + altLL * (var % 2)`, each only where not 0."""
    return (f" + {coef}LL * {var}" if coef else "") + (f" + {alt}LL * ({var} % 2)" if alt else "")


def affine(const: int, coef: int, alt: int, unsigned: bool, var: str = "t") -> str:
    """The C text of `const + coef * var + alt * (var % 2)` (module doc)."""
    if not coef and not alt:
        return f"{const}ULL" if unsigned else str(const)
    if unsigned:
        return f"static_cast<uint64_t>({const}LL{terms(coef, alt, var)})"
    return f"({const}{terms(coef, alt, var)})"


__all__ = ["affine", "terms"]
