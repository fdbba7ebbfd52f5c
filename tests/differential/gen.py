"""Random well-formed protocols for differential testing of the checker and the simulator.

`generate(rng)` draws one protocol from a few shapes that cover what the language can
say — pushes to one peer or to every peer (by the block leader, lanes or warps, on one
queue or a queue per peer, staged through a local `copy` or not, read back after the
wait), counted gathers (with `reset_count`), pulls with `get`, aggregate batches with
`commit`, pipelines of warps on their own queues with `fence()`, run-time lengths read
with `load` (a count header, or a peer's published count read over the link; a `put` of
a loaded length back to the sender) — at 2 or 3 ranks, with
random sizes, signals and launch synchronisation (a leading `barrier()`, `between_launches:
host_sync` or nothing), then applies at most one mutation that usually breaks it (a wait,
quiet, commit or barrier dropped, a signal on the wrong queue, a read before its wait,
two writers of one region, a hand-written `expected` repeated or one too many, a plain
op behind a batch, a batch on another warp's queue, a reset in flight...).  Every text
parses and instantiates; whether it is correct is for the two judges to say.

Deterministic in the `random.Random` it is given: the benchmark draws thousands, the
test suite a fast sample.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Protocol:
    text: str
    ranks: int
    shape: str
    mutation: str
    features: tuple[str, ...] = ()


@dataclass
class _Draft:
    """A protocol being written: declarations, kernel lines, ensure lines."""

    name: str
    ranks: int
    queues: int = 1
    sync: str = "barrier"  # leading barrier | host_sync | none
    windows: dict[str, str] = field(default_factory=dict)
    buffers: dict[str, str] = field(default_factory=dict)
    require: list[str] = field(default_factory=list)
    counters: list[str] = field(default_factory=list)
    body: list[str] = field(default_factory=list)
    ensure: list[str] = field(default_factory=list)
    threads: int = 64
    features: list[str] = field(default_factory=list)

    def text(self) -> str:
        out = [f"protocol {self.name}(b: bytes = {{size}}):", f"    team lsa({self.ranks})"]
        if self.queues != 1:
            out.append(f"    queues {self.queues}")
        if self.sync == "host_sync":
            out.append("    between_launches: host_sync")
        out += [f"    window {n}: {s}" for n, s in self.windows.items()]
        out += [f"    buffer {n}: {s}" for n, s in self.buffers.items()]
        out += [f"    counter {c}" for c in self.counters]
        if self.require:
            out += ["", "    require:"] + ["        " + line for line in self.require]
        out += ["", f"    kernel k(threads={self.threads}):"]
        if self.sync == "barrier":
            out.append("        barrier()")
        out += ["        " + line for line in self.body]
        second = getattr(self, "second", None)
        if second:
            out += ["", f"    kernel k2(threads={self.threads}):"]
            out += ["        " + line for line in second]
        if self.ensure:
            out += ["", "    ensure:"] + ["        " + line for line in self.ensure]
        return "\n".join(out) + "\n"


MUTATIONS: dict[str, tuple[str, ...]] = {}  # shape -> the mutations it supports


def _mutations(*names: str):  # type: ignore[no-untyped-def]
    def register(fn):  # type: ignore[no-untyped-def]
        MUTATIONS[fn.__name__.removeprefix("_")] = ("none", "no_sync", *names)
        return fn
    return register


def _issuer(rng: random.Random, d: _Draft, over: str, var: str = "p") -> tuple[str, str]:
    """An issuer block over `over`: the block leader (`for`), lanes or warps."""
    kind = rng.choice(["for", "lanes", "warps"])
    d.features.append(f"issuer:{kind}")
    if kind == "warps":
        d.threads = max(d.threads, 32 * 4)
    return f"{kind} {var} in {over}:", kind


@_mutations("drop_wait", "drop_quiet", "read_early", "other_queue", "same_dst", "stage_race",
            "expected_repeat", "expected_over")
def _push(rng: random.Random, ranks: int, mut: str) -> _Draft:
    """Every rank puts a block to the next rank, or to every peer; the receiver waits."""
    d = _Draft("push", ranks)
    everyone = rng.random() < 0.5 and ranks > 2
    targets = "peers()" if everyone else "[(me + 1) % nranks]"
    sources = "peers()" if everyone else "[(me - 1) % nranks]"
    d.queues = rng.choice([1, 2])
    per_peer_queue = d.queues == 2 and rng.random() < 0.5
    q_send = "p % 2" if per_peer_queue else "0"
    q_wait = "me % 2" if per_peer_queue else "0"
    if mut == "other_queue":
        d.queues = 2
        q_wait = "(me + 1) % 2" if per_peer_queue else "1"
    stage = rng.random() < 0.4
    readback = rng.random() < 0.5 or mut == "read_early"
    signal = rng.choice(["remote", "both"]) if not stage else "remote"
    d.windows = {"src": "nranks * b", "dst": "nranks * b", "tmp": "nranks * b",
                 "out": "nranks * b"}
    head, _ = _issuer(rng, d, targets)
    d.body.append(head)
    if stage:
        d.body.append("    copy(dst=tmp[p*b : (p+1)*b], src=src[p*b : (p+1)*b])")
    dst = "dst[0 : b]" if mut == "same_dst" and everyone else "dst[me*b : (me+1)*b]"
    if mut == "same_dst" and not everyone:
        dst = "dst[0 : b]"
    src = "tmp" if stage else "src"
    d.body.append(f"    put(p, dst={dst}, src={src}[p*b : (p+1)*b], queue={q_send}, "
                  f"signal=\"{signal}\")")
    if mut == "stage_race" and stage:
        d.body.append("    copy(dst=tmp[p*b : (p+1)*b], src=out[p*b : (p+1)*b])")
    if mut != "drop_quiet":
        d.body.append("    quiet(p)")
    head2, _ = _issuer(rng, d, sources, "s")
    d.body.append(head2)
    copy = "    copy(dst=out[s*b : (s+1)*b], src=dst[s*b : (s+1)*b])"
    waits = [f"    wait_signal(s, queue={q_wait})"]
    if mut == "expected_repeat":
        waits = [f"    wait_signal(s, queue={q_wait}, expected=1)"] * 2
    elif mut == "expected_over":
        waits = [f"    wait_signal(s, queue={q_wait}, expected=2)"]
    if mut == "drop_wait":
        waits = []
    if mut == "read_early":
        d.body += [copy, *waits]
    else:
        d.body += waits + ([copy] if readback else [])
    if d.body[-1] == head2:
        d.body.append("    pass")
    d.ensure = [f"for s in {sources}:",
                "    dst[s*b : (s+1)*b] == init(src@s)[me*b : (me+1)*b]"]
    if readback:
        d.ensure.append("    out[s*b : (s+1)*b] == init(src@s)[me*b : (me+1)*b]")
    d.features += [f"targets:{'all' if everyone else 'next'}", f"signal:{signal}",
                   f"queues:{d.queues}", *(["stage"] if stage else []),
                   *(["readback"] if readback else [])]
    return d


@_mutations("drop_wait", "expected_over", "reset_in_flight", "reset_then_count", "same_dst")
def _counted(rng: random.Random, ranks: int, mut: str) -> _Draft:
    """Every rank but 0 puts its block to rank 0 with a counted write; rank 0 waits."""
    d = _Draft("counted", ranks)
    d.windows = {"src": "b", "dst": "nranks * b", "out": "b"}
    d.counters = ["c"]
    dst = "dst[0 : b]" if mut == "same_dst" else "dst[me*b : (me+1)*b]"
    d.body += ["if me != 0:",
               f"    put(0, dst={dst}, src=src, queue=0, count=c)",
               "    quiet(0)",
               "else:"]
    if mut == "reset_in_flight":
        d.body.append("    reset_count(c)")
    if mut != "drop_wait":
        expected = ", expected=nranks * b" if mut == "expected_over" else ""
        d.body.append(f"    wait_count(c{expected})")
    if mut == "reset_then_count" or (mut == "none" and rng.random() < 0.3):
        d.body.append("    reset_count(c)")
        d.features.append("reset")
    d.body.append("    copy(dst=out, src=src)")
    d.ensure = ["if me == 0:", "    for r in peers():",
                "        dst[r*b : (r+1)*b] == init(src@r)"]
    d.features.append("counted")
    return d


@_mutations("drop_wait", "no_trailing", "local_as_remote")
def _pull(rng: random.Random, ranks: int, mut: str) -> _Draft:
    """Every rank gets the next rank's block; a trailing barrier keeps the source alive."""
    d = _Draft("pull", ranks)
    d.windows = {"src": "nranks * b", "dst": "nranks * b"}
    signal = "remote" if mut == "local_as_remote" else "local"
    d.body += [f"get((me + 1) % nranks, dst=dst[0 : b], src=src[me*b : (me+1)*b], queue=0, "
               f"signal=\"{signal}\")"]
    if mut != "drop_wait":
        d.body.append("wait_signal(me, queue=0)" if signal == "local" else
                      "wait_signal((me - 1) % nranks, queue=0)")
    if mut != "no_trailing":
        d.body.append("barrier()")
    d.ensure = ["dst[0 : b] == init(src@((me + 1) % nranks))[me*b : (me+1)*b]"]
    d.features.append("get")
    return d


@_mutations("drop_commit", "commit_late", "plain_behind", "drop_wait", "quiet_first")
def _batch(rng: random.Random, ranks: int, mut: str) -> _Draft:
    """Rank 0 posts k aggregate puts to rank 1 and commits; the last one signals."""
    d = _Draft("batch", ranks)
    k = rng.choice([1, 2, 3])
    d.windows = {"src": f"{k + 1} * b", "dst": f"{k + 1} * b"}
    lines = []
    for i in range(k):
        sig = ', signal="remote"' if i == k - 1 else ""
        lines.append(f"    put(1, dst=dst[{i}*b : {i + 1}*b], src=src[{k - i}*b : {k - i + 1}*b],"
                     f" queue=0, aggregate=True{sig})")
    if mut == "plain_behind":
        lines.append(f"    put(1, dst=dst[{k}*b : {k + 1}*b], src=src[0 : b], queue=0)")
    if mut == "quiet_first":
        lines.append("    quiet(1)")
    if mut not in ("drop_commit", "commit_late"):
        lines.append("    commit(1, queue=0)")
    if mut != "quiet_first":
        lines.append("    quiet(1)")
    if mut == "commit_late":
        lines.append("    wait_signal(1, queue=0)")
        lines.append("    commit(1, queue=0)")
        lines.append("    quiet(1)")
    d.body += ["if me == 0:", *lines, "elif me == 1:"]
    if mut != "drop_wait":
        d.body.append("    wait_signal(0, queue=0)")
    else:
        d.body.append("    pass")
    if mut == "commit_late":
        d.body.append("    put(0, dst=dst[0 : b], src=src[0 : b], queue=0, signal=\"remote\")")
        d.body.append("    quiet(0)")
    d.ensure = ["if me == 1:"] + [f"    dst[{i}*b : {i + 1}*b] == init(src@0)[{k - i}*b : "
                                  f"{k - i + 1}*b]" for i in range(k)]
    d.features += ["aggregate", f"batch:{k}"]
    return d


@_mutations("shared_queue", "drop_fence", "wait_one_queue", "drop_quiet")
def _warps(rng: random.Random, ranks: int, mut: str) -> _Draft:
    """Rank 0's two warps send a chunk each on their own queue; a fence orders a flag."""
    d = _Draft("warps", ranks)
    d.queues = 3
    d.threads = 128
    fenced = rng.random() < 0.5 or mut == "drop_fence"
    aggregate = rng.random() < 0.3 or mut == "shared_queue"
    d.windows = {"src": "2 * b", "dst": "2 * b", "flag": "32", "got": "32", "out": "2 * b"}
    send = []
    q = "0" if mut == "shared_queue" else "w"
    agg = ", aggregate=True" if aggregate else ""
    send.append(f"        put(1, dst=dst[w*b : (w+1)*b], src=src[w*b : (w+1)*b], queue={q}{agg}"
                + ("" if fenced else ", signal=\"remote\"") + ")")
    if aggregate:
        send.append(f"        commit(1, queue={q})")
    if fenced:
        if mut != "drop_fence":
            send.append("        fence()")
        send.append("        put(1, dst=got[w*16 : (w+1)*16], src=flag[w*16 : (w+1)*16], "
                    "queue=2, signal=\"remote\")")
    if mut != "drop_quiet":
        send.append("        quiet(1)")
    d.body += ["if me == 0:", "    warps w in range(2):", *send, "elif me == 1:"]
    if fenced:
        d.body.append("    wait_signal(0, queue=2, expected=2)")
    else:
        d.body.append("    wait_signal(0, queue=0)")
        if mut != "wait_one_queue":
            d.body.append("    wait_signal(0, queue=1)")
    d.body.append("    copy(dst=out, src=dst)")
    d.ensure = ["if me == 1:", "    out == init(src@0)"]
    d.features += ["warps", *(["fence"] if fenced else []),
                   *(["aggregate"] if aggregate else [])]
    return d


@_mutations("per_lane_expected", "per_group_expected", "drop_wait", "read_early")
def _lanes(rng: random.Random, ranks: int, mut: str) -> _Draft:
    """Lanes of one warp of rank 0 put chunks to rank 1 on one queue: one posting group,
    one signal (or one per lane with `signal_per_copy`)."""
    d = _Draft("lanes", ranks)
    n = rng.choice([2, 4])
    per_copy = rng.random() < 0.4 or mut == "per_group_expected"
    if mut == "per_lane_expected":
        per_copy = False
    d.windows = {"src": f"{n} * b", "dst": f"{n} * b", "out": f"{n} * b"}
    flag = ", signal_per_copy=True" if per_copy else ""
    mode = ', mode="same_queue"' if rng.random() < 0.5 else ""
    d.body += ["if me == 0:",
               f"    lanes i in range({n}):",
               f"        put(1, dst=dst[i*b : (i+1)*b], src=src[i*b : (i+1)*b], queue=0, "
               f"signal=\"remote\"{flag}{mode})",
               "    quiet(1)",
               "elif me == 1:"]
    expected = ""
    if mut == "per_lane_expected":
        expected = f", expected={n}"
    elif mut == "per_group_expected":
        expected = ", expected=1"
    elif per_copy and rng.random() < 0.5:
        expected = f", expected={n}"
    wait = f"    wait_signal(0, queue=0{expected})"
    copy = "    copy(dst=out, src=dst)"
    if mut == "drop_wait":
        d.body.append(copy)
    elif mut == "read_early":
        d.body += [copy, wait]
    else:
        d.body += [wait, copy]
    d.ensure = ["if me == 1:", "    out == init(src@0)"]
    d.features += ["lanes-group", *(["signal_per_copy"] if per_copy else []),
                   *(["same_queue"] if mode else [])]
    return d


@_mutations("expected_repeat", "expected_skip", "drop_wait", "reuse_early")
def _rounds(rng: random.Random, ranks: int, mut: str) -> _Draft:
    """A shift repeated `n` times through one landing slot per round, waits numbered by
    hand (`expected=r + 1`) or paired automatically."""
    d = _Draft("rounds", ranks)
    n = rng.choice([2, 3])
    hand = rng.random() < 0.5 or mut in ("expected_repeat", "expected_skip")
    d.windows = {"src": f"{n} * b", "dst": f"{n} * b", "stage": "b"}
    if mut == "expected_repeat":
        exp = ", expected=1"
    elif mut == "expected_skip":
        exp = ", expected=r + 2"
    else:
        exp = ", expected=r + 1" if hand else ""
    d.body += [f"for r in range({n}):"]
    if mut == "reuse_early":
        d.body += ["    copy(dst=stage, src=src[r*b : (r+1)*b])",
                   "    put((me + 1) % nranks, dst=dst[r*b : (r+1)*b], src=stage, queue=0, "
                   "signal=\"remote\")"]
    else:
        d.body += ["    put((me + 1) % nranks, dst=dst[r*b : (r+1)*b], src=src[r*b : (r+1)*b], "
                   "queue=0, signal=\"remote\")"]
    if mut != "drop_wait":
        d.body.append(f"    wait_signal((me - 1) % nranks, queue=0{exp})")
    d.body.append("quiet((me + 1) % nranks)")
    d.ensure = [f"for r in range({n}):",
                "    dst[r*b : (r+1)*b] == init(src@((me - 1) % nranks))[r*b : (r+1)*b]"]
    d.features += [f"rounds:{n}", *(["hand-expected"] if hand else [])]
    return d


@_mutations("copy_unordered", "copy_after_signal", "drop_ack")
def _fetch(rng: random.Random, ranks: int, mut: str) -> _Draft:
    """Rank 1 fills a window, tells rank 0, which `get`s it and acknowledges; local writes
    against the peer's remote read."""
    d = _Draft("fetch", 2)
    d.queues = 2
    d.windows = {"x": "b", "fresh": "b", "out": "b", "note": "16", "ack": "16"}
    d.body += ["if me == 0:"]
    if mut != "copy_unordered":
        d.body.append("    wait_signal(1, queue=0)")
    d.body += ["    get(1, dst=out, src=x, queue=0, signal=\"local\")",
               "    wait_signal(0, queue=0)"]
    if mut != "drop_ack":
        d.body += ["    put(1, dst=ack, src=note, queue=1, signal=\"remote\")", "    quiet(1)"]
    d.body += ["else:", "    copy(dst=x, src=fresh)"]
    if mut != "copy_unordered":
        d.body += ["    put(0, dst=note, src=ack, queue=0, signal=\"remote\")", "    quiet(0)"]
    if mut == "copy_after_signal":
        d.body.append("    copy(dst=x, src=out)")
    if mut != "drop_ack":
        d.body.append("    wait_signal(0, queue=1)")
    d.ensure = ["if me == 0:", "    out == init(fresh@1)"]
    d.features += ["get", "ack"]
    return d


@_mutations("no_wait_in_second", "aggregate_across", "read_in_first")
def _kernels(rng: random.Random, ranks: int, mut: str) -> _Draft:
    """Two kernels: the first sends, the second waits and reads (transfers outlive the
    kernel that posted them)."""
    d = _Draft("kernels", ranks)
    d.windows = {"src": "b", "dst": "b", "out": "b"}
    agg = ", aggregate=True" if mut == "aggregate_across" else ""
    first = [f"put((me + 1) % nranks, dst=dst, src=src, queue=0, signal=\"remote\"{agg})"]
    if mut == "read_in_first":
        first += ["wait_signal((me - 1) % nranks, queue=0)", "copy(dst=out, src=dst)"]
    second = []
    if mut == "aggregate_across":
        second.append("commit((me + 1) % nranks, queue=0)")
    second.append("quiet((me + 1) % nranks)")
    if mut not in ("no_wait_in_second", "read_in_first"):
        second.append("wait_signal((me - 1) % nranks, queue=0)")
    if mut != "read_in_first":
        second.append("copy(dst=out, src=dst)")
    d.body = first
    d.second = second  # type: ignore[attr-defined]
    d.ensure = ["out == init(src@((me - 1) % nranks))"]
    d.features.append("two-kernels")
    return d


@_mutations("same_queue", "wait_other_block", "drop_quiet")
def _blocks(rng: random.Random, ranks: int, mut: str) -> _Draft:
    """Two blocks of a grid each send a half on its own queue; the receiver waits on both."""
    d = _Draft("blocks", ranks)
    d.queues = 2
    d.windows = {"src": "2 * b", "dst": "2 * b"}
    q = "0" if mut == "same_queue" else "bb"
    d.body += ["blocks bb in range(2):",
               "    if me == 0:",
               f"        put(1, dst=dst[bb*b : (bb+1)*b], src=src[bb*b : (bb+1)*b], queue={q}, "
               "signal=\"remote\")"]
    if mut != "drop_quiet":
        d.body.append("        quiet(1)")
    d.body.append("    elif me == 1:")
    wait_q = "1 - bb" if mut == "wait_other_block" else q
    d.body.append(f"        wait_signal(0, queue={wait_q})")
    d.ensure = ["if me == 1:", "    dst == init(src@0)"]
    d.features.append("blocks")
    return d


@_mutations("signal_not_counter", "reset_unordered", "no_reset")
def _counted_flag(rng: random.Random, ranks: int, mut: str) -> _Draft:
    """A counted put and a signalled flag behind it on one queue; the receiver waits on the
    counter (or the flag) and resets the counter at the end of the launch."""
    d = _Draft("counted_flag", 2)
    d.windows = {"src": "b", "dst": "b", "flag": "16", "got": "16", "out": "b"}
    d.counters = ["c"]
    d.body += ["if me == 0:",
               "    put(1, dst=dst, src=src, queue=0, count=c)",
               "    put(1, dst=got, src=flag, queue=0, signal=\"remote\")",
               "    quiet(1)",
               "else:"]
    if mut == "reset_unordered":
        d.body.append("    reset_count(c)")
    d.body.append("    wait_signal(0, queue=0)" if mut == "signal_not_counter" else
                  "    wait_count(c, expected=b)")
    d.body.append("    copy(dst=out, src=dst)")
    if mut == "signal_not_counter":
        d.body.append("    wait_count(c, expected=b)")
    if mut not in ("no_reset", "reset_unordered"):
        d.body.append("    reset_count(c)")
    d.ensure = ["if me == 1:", "    out == init(src@0)"]
    d.features += ["counted", "reset"]
    return d


@_mutations("expected_one", "drop_wait", "reuse_before_wait")
def _local(rng: random.Random, ranks: int, mut: str) -> _Draft:
    """Lanes send to every peer with a local signal; the sender waits for all of them
    before reusing its source (one local increment per peer the group targets)."""
    d = _Draft("local", ranks)
    d.windows = {"src": "b", "stage": "b", "dst": "nranks * b"}
    d.body += ["lanes p in peers():",
               "    put(p, dst=dst[me*b : (me+1)*b], src=src, queue=0, signal=\"both\")"]
    exp = ", expected=1" if mut == "expected_one" else ""
    wait = f"wait_signal(me, queue=0{exp})"
    copy = "copy(dst=src, src=stage)"
    if mut == "drop_wait":
        d.body.append(copy)
    elif mut == "reuse_before_wait":
        d.body += [copy, wait]
    else:
        d.body += [wait, copy]
    d.body += ["lanes s in peers():", "    wait_signal(s, queue=0)"]
    d.features += ["local-signal", "lanes"]
    return d


@_mutations("drop_credit", "credit_early", "one_slot")
def _credit(rng: random.Random, ranks: int, mut: str) -> _Draft:
    """A ring through two landing slots: the receiver copies each chunk out and returns a
    credit on queue 1 once its slot is free; the sender waits for the credit before it
    reuses the slot two steps later."""
    d = _Draft("credit", ranks)
    d.queues = 2
    n = rng.choice([3, 4])
    slots = 1 if mut == "one_slot" else 2
    d.windows = {"src": f"{n} * b", "slot": f"{slots} * b", "out": f"{n} * b",
                 "tok": "16", "sink": "16"}
    d.body += [f"for s in range({n}):"]
    if mut != "drop_credit":
        d.body += [f"    if s >= {slots}:",
                   "        wait_signal((me + 1) % nranks, queue=1)"]
    d.body += [f"    put((me + 1) % nranks, dst=slot[(s % {slots})*b : (s % {slots} + 1)*b], "
               "src=src[s*b : (s+1)*b], queue=0, signal=\"remote\")",
               "    wait_signal((me - 1) % nranks, queue=0)"]
    copy = f"    copy(dst=out[s*b : (s+1)*b], src=slot[(s % {slots})*b : (s % {slots} + 1)*b])"
    credit = "    put((me - 1) % nranks, dst=sink, src=tok, queue=1, signal=\"remote\")"
    d.body += [credit, copy] if mut == "credit_early" else [copy, credit]
    if mut != "drop_credit":
        d.body += [f"for s in range(min({slots}, {n})):",
                   "    wait_signal((me + 1) % nranks, queue=1)"]
    d.body.append("quiet()")
    d.ensure = [f"for s in range({n}):",
                "    out[s*b : (s+1)*b] == init(src@((me - 1) % nranks))[s*b : (s+1)*b]"]
    d.features += ["credit", f"slots:{slots}"]
    return d


@_mutations("load_early", "drop_wait", "header_other_queue", "remote_load", "echo_no_wait")
def _header(rng: random.Random, ranks: int, mut: str) -> _Draft:
    """Run-time lengths (`load`): every rank puts a count header, then that many elements,
    to every peer (or the next rank); the receiver waits, loads the header and copies
    that many elements out.  `remote_load`: the receiver loads the count from the
    sender's window instead (`load(pub@s[me])`), published by a `copy` (the mutation
    loads it before the wait that orders it after the peer's copy).  `echo` (half of the
    header ones): the receiver also puts what came back to its sender, as many elements
    as the header it loaded says (a `put` of a loaded length), and the sender waits for
    them (`echo_no_wait`: it does not)."""
    d = _Draft("header", ranks)
    cap = rng.choice([2, 4])
    everyone = rng.random() < 0.5 and ranks > 2
    targets = "peers()" if everyone else "[(me + 1) % nranks]"
    sources = "peers()" if everyone else "[(me - 1) % nranks]"
    d.queues = 2 if mut == "header_other_queue" else 1
    d.windows = {"recv": f"i32[nranks * {cap}]", "got": "i32[nranks]", "pub": "i32[nranks]"}
    d.buffers = {"send": f"i32[nranks * {cap}]", "counts": "i32[nranks]",
                 "out": f"i32[nranks * {cap}]"}
    d.require = ["for p in ranks():", f"    0 <= counts[p] <= {cap}"]
    remote = mut == "remote_load" or (mut == "none" and rng.random() < 0.3)
    if remote:
        d.body.append("copy(dst=pub[0 : nranks], src=counts[0 : nranks])")
        if mut != "remote_load":
            d.body.append("barrier()")  # every peer's counts are published
    head, _ = _issuer(rng, d, targets)
    d.body.append(head)
    if not remote:
        hq = 1 if mut == "header_other_queue" else 0
        d.body.append(f"    put(p, dst=got[me : me + 1], src=counts[p : p + 1], queue={hq})")
    d.body += ["    n = load(counts[p])",
               f"    put(p, dst=recv[me * {cap} : me * {cap} + n], "
               f"src=send[p * {cap} : p * {cap} + n], queue=0, signal=\"remote\")"]
    d.body.append("quiet()")
    head2, _ = _issuer(rng, d, sources, "s")
    d.body.append(head2)
    wait = [] if mut == "drop_wait" else ["    wait_signal(s, queue=0)"]
    load = ["    m = load(pub@s[me])" if remote else "    m = load(got[s])"]
    early = mut in ("load_early", "remote_load")  # the load before the wait that orders it
    d.body += (load + wait) if early else (wait + load)
    d.body.append(f"    copy(dst=out[s * {cap} : s * {cap} + m], "
                  f"src=recv[s * {cap} : s * {cap} + m])")
    echo = not remote and (mut == "echo_no_wait" or rng.random() < 0.5)
    if echo:  # a put whose length is the loaded header, back to the sender (its own queue:
        # with 2 ranks its signals would pair with the data's on one slot)
        d.windows["echo"] = f"i32[nranks * {cap}]"
        eq, d.queues = d.queues, d.queues + 1
        d.body += [f"    put(s, dst=echo[me * {cap} : me * {cap} + m], "
                   f"src=recv[s * {cap} : s * {cap} + m], queue={eq}, signal=\"remote\")",
                   "quiet()"]  # my echoes have read `recv`: the next launch may rewrite it
        if mut != "echo_no_wait":
            head3, _ = _issuer(rng, d, targets, "t")
            d.body += [head3, f"    wait_signal(t, queue={eq})"]
    if remote:
        d.body.append("barrier()")  # my peers have read my `pub`: the caller may go on
    n = "init(counts@s)[me]"
    d.ensure = [f"for s in {sources}:",
                f"    out[s * {cap} : s * {cap} + {n}] == "
                f"init(send@s)[me * {cap} : me * {cap} + {n}]"]
    if echo:
        k = "init(counts)[t]"
        d.ensure += [f"for t in {targets}:",
                     f"    echo[t * {cap} : t * {cap} + {k}] == "
                     f"init(send)[t * {cap} : t * {cap} + {k}]"]
    d.features += ["loads", f"targets:{'all' if everyone else 'next'}",
                   *(["remote_load"] if remote else []), *(["echo"] if echo else [])]
    return d


@_mutations()
def _soup(rng: random.Random, ranks: int, mut: str) -> _Draft:
    """Each of two ranks runs a short random sequence of ops over a few blocks of three
    windows: mostly broken, which is the point (the judges must agree on what breaks)."""
    d = _Draft("soup", 2)
    d.queues = rng.choice([1, 2])
    d.windows = {"a": "4 * b", "c": "4 * b", "e": "4 * b"}
    region = lambda: f"{rng.choice('ace')}[{(k := rng.randrange(4))}*b : {k + 1}*b]"  # noqa: E731
    lines: dict[int, list[str]] = {0: [], 1: []}
    for r in (0, 1):
        for _ in range(rng.randint(2, 8)):
            q = rng.randrange(d.queues)
            op = rng.choice(["put", "put", "put", "get", "copy", "quiet", "wait", "wait",
                             "commit", "fence", "barrier"])
            sig = rng.choice(["none", "remote", "remote", "local", "both"])
            agg = ", aggregate=True" if rng.random() < 0.15 else ""
            if op in ("put", "get"):
                lines[r].append(f"{op}({1 - r}, dst={region()}, src={region()}, queue={q}, "
                                f"signal=\"{sig}\"{agg})")
            elif op == "copy":
                lines[r].append(f"copy(dst={region()}, src={region()})")
            elif op == "quiet":
                lines[r].append(f"quiet({1 - r})")
            elif op == "wait":
                src = rng.choice([1 - r, 1 - r, r])
                exp = f", expected={rng.randint(1, 3)}" if rng.random() < 0.3 else ""
                lines[r].append(f"wait_signal({src}, queue={q}{exp})")
            elif op == "commit":
                lines[r].append(f"commit({1 - r}, queue={q})")
            else:
                lines[r].append(f"{op}()")
    both = [line for line in lines[0] if line == "barrier()"]
    if len(both) != len([line for line in lines[1] if line == "barrier()"]) and \
            rng.random() < 0.7:  # mostly matched barriers, or every test is an E030
        lines = {r: [ln for ln in lines[r] if ln != "barrier()"] for r in (0, 1)}
    d.body += ["if me == 0:", *("    " + ln for ln in lines[0]), "else:",
               *("    " + ln for ln in lines[1])]
    if not lines[0]:
        d.body.insert(1, "    pass")
    if not lines[1]:
        d.body.append("    pass")
    d.features.append("soup")
    return d


SHAPES = {"push": _push, "counted": _counted, "pull": _pull, "batch": _batch, "warps": _warps,
          "lanes": _lanes, "rounds": _rounds, "fetch": _fetch, "kernels": _kernels,
          "blocks": _blocks, "counted_flag": _counted_flag, "local": _local,
          "credit": _credit, "soup": _soup, "header": _header}
TWO_RANKS = frozenset({"batch", "lanes", "fetch", "blocks", "counted_flag", "soup"})


def generate(rng: random.Random, mutate: float = 0.6,
             shapes: frozenset[str] | None = None) -> Protocol:
    """One random protocol (of one of `shapes`, every shape by default); with probability
    `mutate`, one mutation of its shape."""
    shape = rng.choice(sorted(shapes or SHAPES))
    ranks = rng.choice([2, 3]) if shape not in TWO_RANKS else 2
    muts = MUTATIONS[shape]
    mut = rng.choice(muts[1:]) if rng.random() < mutate else "none"
    d = SHAPES[shape](rng, ranks, mut)
    d.sync = "none" if mut == "no_sync" else rng.choice(["barrier", "barrier", "host_sync",
                                                          "host_sync", "none"])
    d.features.append(f"sync:{d.sync}")
    size = rng.choice([16, 64, 256])
    text = d.text().replace("{size}", f"{size} B")
    return Protocol(text, ranks, shape, mut, tuple(d.features))


__all__ = ["MUTATIONS", "SHAPES", "Protocol", "generate"]
