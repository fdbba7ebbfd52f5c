"""The nesting depth of an IR protocol, measured without recursion.

The text front end refuses source nested past `ccogen.limits.MAX_DEPTH` (E006 at the
line).  A protocol built in Python (`ccogen.builder`, or IR nodes made by hand) skips
the parser; `depth_error` gives it the same E006 before anything recurses on it (the
evaluator's compiler, the printer, the checks).
"""

from __future__ import annotations

import dataclasses

from ccogen.diag import Diagnostic, error
from ccogen.ir import nodes as ir
from ccogen.limits import MAX_DEPTH
from ccogen.source import Span

# IR levels per syntax-tree level are fewer (a syntax tree wraps each expression in
# rules); the IR limit allows what the parser allows
IR_MAX_DEPTH = MAX_DEPTH


def depth_error(protocol: ir.Protocol) -> Diagnostic | None:
    """E006 when `protocol` nests deeper than `IR_MAX_DEPTH` nodes, else None."""
    stack: list[tuple[object, int]] = [(protocol, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > IR_MAX_DEPTH:
            span = getattr(node, "span", None) or protocol.span
            return error("E006", f"the protocol is nested more than {IR_MAX_DEPTH} levels deep",
                         span, "too deep from here",
                         help="build the expression or the blocks less deeply nested (this "
                              "limit is fixed)")
        if isinstance(node, tuple):
            stack.extend((child, depth) for child in node)
        elif dataclasses.is_dataclass(node) and not isinstance(node, type):
            for f in dataclasses.fields(node):
                value = getattr(node, f.name)
                if isinstance(value, Span):
                    continue
                if isinstance(value, tuple) or dataclasses.is_dataclass(value):
                    stack.append((value, depth + 1))
    return None


__all__ = ["IR_MAX_DEPTH", "depth_error"]
