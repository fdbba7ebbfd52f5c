"""Names: a declared name must be a Python identifier that is neither a keyword nor a
built-in name of the language."""

from __future__ import annotations

import keyword
from typing import Final

from ccogen.builder.values import describe, fail
from ccogen.ir.dtype import DTYPE_NAMES
from ccogen.ir.signatures import SIGNATURES
from ccogen.source import Span

_BUILTINS: Final = ("peers", "ranks", "range", "len", "min", "max", "abs")
_KEYWORDS: Final = frozenset(
    {*keyword.kwlist, "protocol", "team", "queues", "window", "counter", "kernel", "ensure",
     "lanes", "warps", "blocks", "auto", "buffer"}
)
_BUILTIN_NAMES: Final = frozenset({"me", "nranks", "init", "sum", *_BUILTINS, *SIGNATURES,
                                   *DTYPE_NAMES})
_NAME_HELP: Final = "names are Python identifiers that are neither keywords nor built-in names"


def check_name(name: object, what: str, span: Span) -> str:
    """A valid, unreserved name for a `what`, or an E002."""
    if not isinstance(name, str):
        fail("E002", f"the {what} name must be a string, not {describe(name)}", span,
              "not a name")
    if not name.isidentifier() or not name.isascii():
        fail("E002", f"`{name}` is not a valid name", span, f"cannot name a {what}",
              help=_NAME_HELP)
    if name in _KEYWORDS:
        fail("E002", f"`{name}` is a keyword", span, f"cannot name a {what}", help=_NAME_HELP)
    if name in _BUILTIN_NAMES:
        fail("E002", f"`{name}` is a built-in name", span, f"cannot name a {what}",
              help=_NAME_HELP)
    return name


def name_ok(name: str) -> bool:
    return name.isidentifier() and name.isascii() and name not in _KEYWORDS \
        and name not in _BUILTIN_NAMES
