"""HIP spelling of mori-sdma's statements (`codegen.steps.Stmt`).

`stmt(s, indent)` is the text of one statement: lines, each ending in a newline, every
one starting with `indent`.  The calls name `ccoSdma` members (`sdma.put<...>`) and the
helpers templates/mori_sdma/kernels.hip.j2 defines (`ccogen_copy_block`, ...); that
template prints the text inside each block program.
"""

from __future__ import annotations

from collections.abc import Callable

from ccogen.codegen.steps import Stmt, StmtKind

Spelling = Callable[[Stmt, str], list[str]]


def stmt(s: Stmt, indent: str) -> str:
    """The text of `s`, indented by `indent` (module doc)."""
    return "".join(line + "\n" for line in SPELLINGS[s.kind](s, indent))


def call(s: Stmt) -> str:
    """`func<targs>(args);` (no template arguments: `func(args);`)."""
    targs = f"<{', '.join(s.targs)}>" if s.targs else ""
    return f"{s.func}{targs}({', '.join(s.args)});"


def _bool(value: object) -> str:
    return "true" if value else "false"


def _text(s: Stmt, ind: str) -> list[str]:
    return [f"{ind}{s.text}"]


def _call(s: Stmt, ind: str) -> list[str]:
    guard = f"if ({s.guard}) " if s.guard else ""
    return [f"{ind}{guard}{call(s)}"]


def _wait(s: Stmt, ind: str) -> list[str]:
    # MORI polls with relaxed loads: acquire before reading what the signal announces
    return [f"{ind}if ({s.guard or 'true'}) {{", f"{ind}  {call(s)}",
            f"{ind}  ccogen_acquire_system();", f"{ind}}}"]


def _reduce(s: Stmt, ind: str) -> list[str]:
    red = s.reduction
    assert red is not None
    dst, nbytes, vec = s.args
    offsets = ", ".join(f"{off}ULL" for _, off in red.srcs)
    lines = [f"{ind}{{", f"{ind}  const uint64_t s[] = {{ {offsets} }};"]
    if red.weights:
        lines.append(f"{ind}  const {red.acc} w[] = {{ {', '.join(red.weights)} }};")
    lines.append(
        f"{ind}  {s.func}<{red.ctype}, {red.acc}, CCOGEN_{red.op.upper()}, {len(red.srcs)}, "
        f"{_bool(red.weights)}>(c, {dst}, s, {'w' if red.weights else 'nullptr'}, {nbytes}, "
        f"{vec});")
    return [*lines, f"{ind}}}"]


def _sync(s: Stmt, ind: str) -> list[str]:
    return [f"{ind}{s.text};"]


def _open(s: Stmt, ind: str) -> list[str]:
    return [f"{ind}if ({s.guard}) {{"]


def _close(s: Stmt, ind: str) -> list[str]:
    return [f"{ind}}}"]


def _lanes(s: Stmt, ind: str) -> list[str]:
    """The lanes of one call site: each sets its arguments from the table, then calls."""
    lines = [f"{ind}{{", f"{ind}  ccogen_lane a{{}};", f"{ind}  switch (threadIdx.x) {{"]
    for thread, fields in s.rows:
        sets = "".join(f" a.{name} = {value};" for name, value in fields)
        lines.append(f"{ind}    case {thread}: a.on = true;{sets} break;")
    lines += [f"{ind}    default: break;", f"{ind}  }}", f"{ind}  if (a.on) {{",
              f"{ind}    {call(s)}"]
    if s.acquire:
        lines.append(f"{ind}    ccogen_acquire_system();")
    return [*lines, f"{ind}  }}", f"{ind}}}"]


SPELLINGS: dict[StmtKind, Spelling] = {
    StmtKind.COMMENT: _text,
    StmtKind.CALL: _call,
    StmtKind.WAIT: _wait,
    StmtKind.REDUCE: _reduce,
    StmtKind.LET: _text,
    StmtKind.SYNC: _sync,
    StmtKind.OPEN: _open,
    StmtKind.CLOSE: _close,
    StmtKind.LANES: _lanes,
}
"""Every statement kind's spelling (tests/codegen/spell/test_hip.py: one for each)."""


__all__ = ["SPELLINGS", "call", "stmt"]
