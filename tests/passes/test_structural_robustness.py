"""The structural, capability and performance checks never raise, on any instance.

Protocols are assembled from random `.cco` snippets (puts, gets, commits, quiets,
waits, barriers, counters; under `lanes`, `warps`, `for`, `if`) so that most of them
instantiate; the checks then run with every target.
"""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccogen.errors import DiagnosticError
from ccogen.instantiate import instantiate
from ccogen.passes import PIPELINE
from ccogen.passes.base import PassContext
from ccogen.syntax import parse_ir
from ccogen.targets import TARGETS
from tests.passes.test_library_structural import OURS

MINE = [check for check in PIPELINE if set(check.codes) <= OURS]

PEERS = st.sampled_from(["(me + 1) % nranks", "(me + v) % nranks", "0", "1"])
QUEUES = st.sampled_from(["", ", queue=0", ", queue=1", ", queue=v % 3", ", queue=-1"])
OFFSETS = st.sampled_from(["0", "v*64", "v*4096", "16", "4 + v*16", "(7 - v % 8)*4096"])
SIZES = st.sampled_from(["64", "4096", "100", "256 KiB"])
OPTIONS = st.lists(st.sampled_from([
    ', signal="remote"', ', signal="local"', ', signal="both"', ", aggregate=True",
    ", signal_per_copy=True", ', mode="same_queue"', ', mode="independent"', ", count=c"]),
    max_size=3, unique_by=lambda o: o.split("=")[0])


@st.composite
def transfer(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["put", "get"]))
    gets_lack = ("count", "per_copy")
    opts = [o for o in draw(OPTIONS) if kind == "put" or not any(g in o for g in gets_lack)]
    off, size = draw(OFFSETS), draw(SIZES)
    region = f"[{off} : {off} + {size}]"
    return (f"{kind}({draw(PEERS)}, dst=recv{region}, src=send{region}"
            f"{draw(QUEUES)}{''.join(opts)})")


STATEMENTS = st.one_of(
    transfer(),
    PEERS.map(lambda p: f"commit({p}, queue=0)"),
    st.sampled_from(["quiet()", "quiet((me + 1) % nranks)", "barrier()", "wait_count(c)",
                     "wait_signal((me + 1) % nranks, queue=0)", "wait_signal(me, queue=0)",
                     "copy(dst=recv[0:64], src=send[0:64])"]),
)
BLOCKS = st.sampled_from(["", "lanes v in range({n}):", "warps v in range({n}):",
                          "for v in range({n}):", "if me == 0:"])


@st.composite
def protocol_text(draw: st.DrawFn) -> str:
    lines = []
    for _ in range(draw(st.integers(1, 4))):
        head = draw(BLOCKS).format(n=draw(st.sampled_from([1, 2, 4, 8, 33])))
        body = draw(st.lists(STATEMENTS, min_size=1, max_size=3))
        if " v " not in head:
            body = [re.sub(r"\bv\b", "1", s) for s in body]
        indent = "            " if head else "        "
        lines += ([f"        {head}"] if head else []) + [indent + s for s in body]
    team = draw(st.sampled_from(["lsa", "world", "lsa(2)"]))
    queues = draw(st.sampled_from(["1", "2", "8", "auto", "16"]))
    return (f"protocol fuzz():\n    team {team}\n    queues {queues}\n"
            f"    window send: 4 MiB, align={draw(st.sampled_from([8, 16, 264, 4096]))}\n"
            "    window recv: 4 MiB\n    counter c\n\n"
            "    kernel k(threads=1024, blocks=2):\n" + "\n".join(lines) + "\n")


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(protocol_text(), st.sampled_from([None, *TARGETS]), st.sampled_from([2, 3, 4]))
def test_checks_never_raise(text: str, target: str | None, nranks: int) -> None:
    try:
        protocol = parse_ir(text, "<fuzz>.cco")
    except DiagnosticError:
        return
    instance, _ = instantiate(protocol, nranks)
    if instance is None:
        return
    ctx = PassContext(instance=instance, target=target)
    for check in MINE:
        check().run(ctx)
    assert all(d.code in OURS for d in ctx.sink)
