"""Random protocols with long loops, for the differential test of loop sampling.

`loop_protocol(rng)` writes a `.cco` protocol whose kernels and `ensure` hold `for`
loops of 2 to 9 iterations (those of 4 or more are what `ccogen.instantiate.sampling`
checks on three iterations), correct or with one mutation drawn from the mistakes the
sampling conditions must not hide: a row out of bounds at the last iteration only, rows
that overlap the next iteration's, a stride of 0, an `ensure` one row off, a source read
at another stride, an op outside the loop touching one row, an `if` on the loop
variable, a run-time length whose `require` misses the last element, a missing wait or
barrier.  `tests/differential/test_sampling.py` and `benchmarks/sampling_differential.py`
check that the sampled and the fully unrolled instances give the same findings.
"""

from __future__ import annotations

import random

MUTATIONS = ("none", "none", "none", "last-row-out", "overlap-next", "stride-zero",
             "ensure-shifted", "src-stride", "outside-touch", "if-on-var", "require-short",
             "no-wait", "no-barrier", "runtime-len", "reduce")
SHAPES = ("put", "get", "copy", "reduce", "runtime")


def loop_protocol(rng: random.Random) -> tuple[str, str]:
    """(text, label): one protocol with long loops, and what it was drawn as."""
    shape = rng.choice(SHAPES)
    mut = rng.choice(MUTATIONS)
    rows = rng.choice((2, 3, 4, 5, 6, 9))
    width = rng.choice((8, 16, 64))
    length = width if rng.random() < 0.6 else width // 2
    if shape == "reduce":
        return _reduce(rows, width, mut), f"reduce/{mut}/rows={rows}"
    return _transfer(rng, shape, rows, width, length, mut), f"{shape}/{mut}/rows={rows}"


def _transfer(rng: random.Random, shape: str, rows: int, width: int, length: int,
              mut: str) -> str:
    row_d = "(me * rows + t) * width"
    row_s = "t * width"
    if mut == "stride-zero":
        row_d = "me * rows * width"
    if mut == "src-stride":
        row_s = "(t // 1 + t * 0) * width" if rng.random() < 0.3 else "(2 * t % rows) * width"
    stop_d = f"{row_d} + {length}"
    if mut == "overlap-next":
        stop_d = f"{row_d} + {length} + 1"
    if mut == "last-row-out":
        row_d = "(me * rows + t) * width + width // 2"
        stop_d = f"{row_d} + {length}"
    runtime = shape == "runtime" or mut in ("runtime-len", "require-short")
    n = "n" if runtime else str(length)
    if runtime:
        stop_d = f"{row_d} + n"
    body = []
    if runtime:
        body.append("n = load(lens[t])")
    if mut == "if-on-var":
        body.append("if t != 1:")
        indent = "    "
    else:
        indent = ""
    src_stop = f"{row_s} + {n}"
    queue = ", queue=0" if shape in ("put", "runtime", "get") else ""
    if shape == "get":  # pulls peer p's rows into my inbox, at p's place
        row_d, stop_d = row_d.replace("me * rows", "p * rows"), stop_d.replace("me * rows",
                                                                                "p * rows")
        body.append(indent + f"get(p, dst=inbox[{row_d} : {stop_d}], src=out[{row_s} : "
                    f"{src_stop}]{queue})")
    elif shape == "copy":
        body.append(indent + f"copy(dst=inbox[{row_d} : {stop_d}], src=out[{row_s} : "
                    f"{src_stop}])")
    else:
        body.append(indent + f"put(p, dst=inbox[{row_d} : {stop_d}], src=out[{row_s} : "
                    f"{src_stop}]{queue})")
    loop = "\n".join("                " + b for b in body)
    lines = [
        f"protocol looped(rows: int = {rows}, width: int = {width}):",
        "    team lsa",
        "    queues 1",
        "    window out: u8[rows * width]",
        "    window inbox: u8[nranks * rows * width" + (" + width]" if mut != "last-row-out"
                                                     else "]"),
    ]
    if runtime:
        lines.append("    buffer lens: i32[rows]")
        lines.append("    require:")
        count = "rows - 1" if mut == "require-short" else "rows"
        lines.append(f"        for i in range({count}):")
        lines.append(f"            0 <= lens[i] <= {length}")
    lines.append("")
    lines.append("    kernel move(threads=64):")
    if mut != "no-barrier":
        lines.append("        barrier()")
    if shape == "copy":
        lines.append("        for p in [me]:")
        lines.append("            for t in range(rows):")
        lines.append(loop)
    elif shape == "get":
        lines.append("        lanes p in peers():")
        lines.append("            for t in range(rows):")
        lines.append(loop)
        lines.append("            quiet(p)")
    else:
        lines.append("        lanes p in peers():")
        lines.append("            for t in range(rows):")
        lines.append(loop)
        lines.append("            signal(p, queue=0)")
        if mut != "no-wait":
            lines.append("        lanes p in peers():")
            lines.append("            wait_signal(p, queue=0)")
    if mut == "outside-touch":
        lines.append("        copy(dst=inbox[(me * rows + rows - 2) * width : "
                     "(me * rows + rows - 2) * width + 1], src=out[0:1])")
    if shape != "copy":
        lines.append("        barrier()")
    lines.append("")
    lines.append("    ensure:")
    who = "[me]" if shape == "copy" else "peers()"
    shift = " + 1" if mut == "ensure-shifted" else ""
    ln = "lens" if runtime else ""
    lines.append(f"        for p in {who}:")
    lines.append("            for t in range(rows" + (" - 1" if shift else "") + "):")
    if shape == "get":
        # a get pulls peer p's rows into my inbox at row (me * rows + t): p's `out`
        lines.append(f"                inbox[(p * rows + t{shift}) * width : (p * rows + t{shift}) "
                     f"* width + {length if not ln else 1}] == init(out@p)[t * width : t * width + "
                     f"{length if not ln else 1}]")
    else:
        src_rank = "me" if shape == "copy" else "p"
        lines.append(f"                inbox[(p * rows + t{shift}) * width : (p * rows + t{shift}) "
                     f"* width + {length if not ln else 1}] == init(out@{src_rank})[t * width : "
                     f"t * width + {length if not ln else 1}]")
    return "\n".join(lines) + "\n"


def _reduce(rows: int, width: int, mut: str) -> str:
    row = "(p * rows + t) * width"
    if mut == "ensure-shifted":
        pass
    dst = "t * width"
    if mut == "stride-zero":
        dst = "0"
    stop = f"{dst} + width" if mut != "overlap-next" else f"{dst} + width + 1"
    shift = " + 1" if mut == "ensure-shifted" else ""
    lines = [
        f"protocol summed(rows: int = {rows}, width: int = {width}):",
        "    team lsa",
        "    window part: i32[nranks * rows * width]",
        "    buffer total: i32[rows * width + 1]",
        "",
        "    kernel add(threads=64):",
        "        barrier()" if mut != "no-barrier" else "        fence()",
        "        for t in range(rows):",
        f"            reduce(dst=total[{dst} : {stop}],",
        f"                   srcs=[part@p[{row} : {row} + width] for p in ranks()], op=\"sum\")",
        "        barrier()",
        "",
        "    ensure:",
        "        for t in range(rows" + (" - 1" if shift else "") + "):",
        f"            total[(t{shift}) * width : (t{shift} + 1) * width] == sum([init(part@p)["
        f"(p * rows + t) * width : (p * rows + t + 1) * width] for p in ranks()])",
    ]
    return "\n".join(lines) + "\n"





def findings(text: str, name: str, *, sample: bool, ranks: tuple[int, ...] | None = (2, 3),
             params: dict[str, int] | None = None) -> frozenset[tuple[str, int]]:
    """The (code, line) of every finding `ccogen lint` makes, with loops sampled or not."""
    from ccogen.driver import CheckOptions, check_text

    result = check_text(text, name, CheckOptions(ranks=ranks, params=params or {},
                                                 sample_loops=sample))
    return frozenset((d.code, d.span.line if d.span is not None else 0)
                     for d in result.diagnostics)


def disagreement(text: str, name: str, **kw: object) -> str:
    """"" where the sampled and the unrolled instances find the same, else both sets."""
    a = findings(text, name, sample=True, **kw)  # type: ignore[arg-type]
    b = findings(text, name, sample=False, **kw)  # type: ignore[arg-type]
    return "" if a == b else f"sampled {sorted(a)} != unrolled {sorted(b)}"
__all__ = ["MUTATIONS", "SHAPES", "disagreement", "findings", "loop_protocol"]
