"""CUDA C++ spelling of the SM targets' steps (`codegen.steps`).

`step(s, scope, indent)` is the text of one step run at `scope` (`group`, `warp` or
`thread`): lines, each ending in a newline, every one starting with `indent`.  The calls
name the `ccogen_<kind>_<scope>` primitives each backend's kernels.cu.j2 defines (and the
shared device header, templates/common/ccogen_device.cuh.j2); templates/common/_steps.j2
prints the text inside each block program.  A step with `let` declarations is a C block
that declares them first; `loop` and `spread` steps spell their bodies one level deeper.
"""

from __future__ import annotations

from collections.abc import Callable

from ccogen.codegen.steps import Step, StepKind

INDENT = "  "
Spelling = Callable[[Step, str, str], list[str]]


def step(s: Step, scope: str, indent: str) -> str:
    """The text of `s` at `scope`, indented by `indent` (module doc)."""
    return "".join(line + "\n" for line in lines(s, scope, indent))


def lines(s: Step, scope: str, indent: str) -> list[str]:
    """The lines of `step`, without their newlines."""
    call = SPELLINGS[s.kind]
    if not s.let:
        return call(s, scope, indent)
    inner = indent + INDENT
    return [f"{indent}{{",
            *(f"{inner}const uint64_t {name} = static_cast<uint64_t>({value});"
              for name, value in s.let),
            *call(s, scope, inner),
            f"{indent}}}"]


def qualifier(inline: bool) -> str:
    """How a program or a step primitive is declared: inlined, or out of line."""
    return "__forceinline__" if inline else "__noinline__"


def _u(value: int) -> str:
    return f"{value}ULL"


def _plain(s: Step, scope: str, ind: str) -> list[str]:
    """A primitive of the context alone (quiet, fence, ctasync, fabacquire)."""
    return [f"{ind}ccogen_{s.kind.value}_{scope}(c);"]


def _comment(s: Step, scope: str, ind: str) -> list[str]:
    return [f"{ind}{s.text}"]


def _copy(s: Step, scope: str, ind: str) -> list[str]:
    return [f"{ind}ccogen_copy_{scope}(c, {s.c_dst_peer}, {s.c_dst_off}, {s.c_src_peer}, "
            f"{s.c_src_off}, {s.c_nbytes}, {s.c_vec});"]


def _putsig(s: Step, scope: str, ind: str) -> list[str]:
    return [f"{ind}ccogen_{s.kind.value}_{scope}(c, {s.c_dst_peer}, {s.c_dst_off}, "
            f"{s.c_src_off}, {s.c_nbytes}, {s.c_off}, {s.c_value});"]


def _putcounted(s: Step, scope: str, ind: str) -> list[str]:
    return [f"{ind}ccogen_putcounted_{scope}(c, {s.c_dst_peer}, {s.c_dst_off}, {s.c_src_off}, "
            f"{s.c_nbytes}, {s.c_off});"]


def _waitcounted(s: Step, scope: str, ind: str) -> list[str]:
    return [f"{ind}ccogen_waitcounted_{scope}(c, {s.c_off}, {s.c_value}, "
            f"{s.c_per_epoch}, {s.c_line}, {s.c_src}, {s.c_queue}, {s.wait_kind});"]


def _signal(s: Step, scope: str, ind: str) -> list[str]:
    return [f"{ind}ccogen_{s.kind.value}_{scope}(c, {s.c_peer}, {s.c_off}, {s.c_value});"]


def _wait(s: Step, scope: str, ind: str) -> list[str]:
    return [f"{ind}ccogen_{s.kind.value}_{scope}(c, {s.c_off}, {s.c_value}, "
            f"{s.c_per_epoch}, {s.c_line}, {s.c_src}, {s.c_queue}, {s.wait_kind}, "
            f"{_u(s.scale)});"]


def _rtwait(s: Step, scope: str, ind: str) -> list[str]:
    return [f"{ind}ccogen_{s.kind.value}_{scope}(c, {s.c_off}, {s.c_value}, {s.c_line}, "
            f"{s.c_queue});"]


def _require(s: Step, scope: str, ind: str) -> list[str]:
    return [f"{ind}ccogen_require(c, {s.text}, {s.c_line}, {s.c_src}, {s.c_value});"]


def _body(steps: tuple[Step, ...], scope: str, ind: str) -> list[str]:
    return [line for b in steps for line in lines(b, scope, ind)]


def _loop(s: Step, scope: str, ind: str) -> list[str]:
    return [f"{ind}for (int64_t {s.var} = 0; {s.var} < {s.c_trips}; ++{s.var}) {{",
            *_body(s.body, scope, ind + INDENT),
            f"{ind}}}"]


def _spread(s: Step, scope: str, ind: str) -> list[str]:
    sp = s.spread
    assert sp is not None
    lines = [f"{ind}{s.text}",
             f"{ind}for (uint64_t i = ccogen_spread_first(c); i < {_u(sp.items)}; "
             "i += ccogen_spread_stride(c)) {",
             f"{ind}  [[maybe_unused]] const int64_t t = static_cast<int64_t>(i / "
             f"{_u(sp.per_iteration)});",
             f"{ind}  [[maybe_unused]] const uint64_t chunk = i / {_u(sp.branches)} % "
             f"{_u(sp.chunks)};",
             f"{ind}  switch (i % {_u(sp.branches)}) {{"]
    for index, case in enumerate(sp.cases):  # the rows are run by warps
        lines += [f"{ind}    case {index}: {{", *_body(case, "warp", ind + "      "),
                  f"{ind}    }} break;"]
    return [*lines, f"{ind}    default: break;", f"{ind}  }}", f"{ind}}}"]


def _chunk(s: Step, scope: str, ind: str) -> list[str]:
    return [f"{ind}ccogen_copy_chunk_warp(c, {s.c_dst_peer}, {s.c_dst_off}, {s.c_src_peer}, "
            f"{s.c_src_off}, {s.c_nbytes}, chunk, {s.c_value});"]


def _llput(s: Step, scope: str, ind: str) -> list[str]:
    return [f"{ind}ccogen_llput_{scope}(c, {s.c_dst_peer}, {s.c_off}, {s.c_src_off}, "
            f"{s.c_nbytes}, {s.c_value}, {s.c_per_epoch});"]


def _llwait(s: Step, scope: str, ind: str) -> list[str]:
    return [f"{ind}ccogen_llwait_{scope}(c, {s.c_off}, {s.c_value}, {s.c_per_epoch}, "
            f"{s.c_dst_off}, {s.c_nbytes}, {s.c_line}, {s.c_src}, {s.c_queue});"]


def _bool(value: object) -> str:
    return "true" if value else "false"


def _reduce(s: Step, scope: str, ind: str) -> list[str]:
    red = s.reduction
    assert red is not None
    srcs = ", ".join(f"{{ {peer}, {off} }}" for peer, off in s.c_srcs)
    lines = [f"{ind}{{", f"{ind}  const ccogen_addr s[] = {{{srcs}}};"]
    if red.weights:
        lines.append(f"{ind}  const {red.acc} w[] = {{ {', '.join(red.weights)} }};")
    weights = "w" if red.weights else "nullptr"
    if red.kinds:  # a converting `reduce`: each source widened by its own type
        lines.append(f"{ind}  const int k[] = {{ {', '.join(red.kinds)} }};")
        lines.append(
            f"{ind}  ccogen_reducex_{scope}<{red.ctype}, CCOGEN_{red.op.upper()}, "
            f"{len(red.srcs)}, {_bool(red.weights)}>(c, {s.c_dst_peer}, {s.c_dst_off}, s, k, "
            f"{weights}, {red.elements}ULL, {s.c_line});")
    else:
        lines.append(
            f"{ind}  ccogen_reduce_{scope}<{red.ctype}, {red.acc}, CCOGEN_{red.op.upper()}, "
            f"{len(red.srcs)}, {_bool(red.weights)}>(c, {s.c_dst_peer}, {s.c_dst_off}, s, "
            f"{weights}, {s.c_nbytes}, {s.c_vec}, {s.c_line});")
    return [*lines, f"{ind}}}"]


def _sync(s: Step, scope: str, ind: str) -> list[str]:
    return [f"{ind}ccogen_sync_{scope}(c, {s.c_seq}, kSyncs);"]


def _barrier(s: Step, scope: str, ind: str) -> list[str]:
    return [f"{ind}ccogen_barrier_{scope}(c, {s.c_seq});"]


def _pfence(s: Step, scope: str, ind: str) -> list[str]:
    return [f"{ind}ccogen_pfence_{scope}(c, {s.text});"]


def _reset(s: Step, scope: str, ind: str) -> list[str]:
    return [f"{ind}ccogen_reset_{scope}(c, {s.c_off});"]


SPELLINGS: dict[StepKind, Spelling] = {
    StepKind.COMMENT: _comment,
    StepKind.COPY: _copy,
    StepKind.PUTSIG: _putsig,
    StepKind.CPUTSIG: _putsig,
    StepKind.PUTCOUNTED: _putcounted,
    StepKind.WAITCOUNTED: _waitcounted,
    StepKind.SIGNAL: _signal,
    StepKind.CSIGNAL: _signal,
    StepKind.WAIT: _wait,
    StepKind.CWAIT: _wait,
    StepKind.RTWAIT: _rtwait,
    StepKind.RTWAITCOUNTED: _rtwait,
    StepKind.REQUIRE: _require,
    StepKind.LOOP: _loop,
    StepKind.SPREAD: _spread,
    StepKind.CHUNK: _chunk,
    StepKind.LLPUT: _llput,
    StepKind.LLWAIT: _llwait,
    StepKind.REDUCE: _reduce,
    StepKind.SYNC: _sync,
    StepKind.BARRIER: _barrier,
    StepKind.PFENCE: _pfence,
    StepKind.RESET: _reset,
    StepKind.QUIET: _plain,
    StepKind.FENCE: _plain,
    StepKind.CTASYNC: _plain,
    StepKind.FABACQUIRE: _plain,
}
"""Every step kind's spelling (tests/codegen/spell/test_cuda.py: one for each)."""


__all__ = ["SPELLINGS", "lines", "qualifier", "step"]
