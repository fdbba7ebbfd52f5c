"""Run one pass on one instance of `.cco` text (the unit tests of the structural,
capability and performance checks share this)."""

from __future__ import annotations

import textwrap

from ccogen.diag import Diagnostic
from ccogen.instantiate import instantiate
from ccogen.ir.instance import Instance
from ccogen.passes.base import Pass, PassContext
from ccogen.syntax import parse_ir


def instance_of(text: str, nranks: int = 2, params: dict[str, int] | None = None) -> Instance:
    protocol = parse_ir(textwrap.dedent(text), "<test>.cco")
    instance, diags = instantiate(protocol, nranks, params or {})
    assert instance is not None and not [d for d in diags if d.is_error], diags
    return instance


def run_pass(check: type[Pass], text: str, nranks: int = 2, target: str | None = None,
             params: dict[str, int] | None = None) -> list[Diagnostic]:
    ctx = PassContext(instance=instance_of(text, nranks, params), target=target)
    check().run(ctx)
    return list(ctx.sink)


def codes(diags: list[Diagnostic]) -> list[str]:
    return [d.code for d in diags]


def kernel(body: str, *, head: str = "", threads: int = 32, team: str = "lsa(2)",
           windows: str = "window send: 1 MiB\nwindow recv: 1 MiB") -> str:
    """A protocol around one kernel body (written at 4 spaces of indentation)."""
    decl = "\n".join("    " + line for line in textwrap.dedent(head + "\n" + windows).splitlines()
                     if line.strip())
    inner = "\n".join("        " + line for line in textwrap.dedent(body).splitlines())
    return (f"protocol p(c: bytes = 256 KiB):\n    team {team}\n{decl}\n\n"
            f"    kernel k(threads={threads}):\n{inner}\n")
