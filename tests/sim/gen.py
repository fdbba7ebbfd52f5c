"""Random small protocols for the simulator's property tests.

`protocols()` draws `.cco` texts from a few shapes (all-to-all, shifts, ping-pong,
counted gather, a multi-queue pipeline) with random sizes, issuers and counts, and
optionally one mutation that usually breaks them (a dropped wait or quiet, a read
moved before its wait, a signal on another queue, two writers of one region).
Texts are returned with the team sizes to try.  Every shape declares
`between_launches: host_sync` (they write into peers' outputs without a leading
barrier); the mutation `back_to_back` drops it, which usually breaks them.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

MUTATIONS = ("none", "drop_wait", "drop_quiet", "read_early", "other_queue", "same_dst",
             "back_to_back")


@dataclass(frozen=True)
class Gen:
    text: str
    ranks: tuple[int, ...]
    shape: str
    mutation: str


def _exchange(d: st.DrawFn, mutation: str) -> Gen:
    block = d(st.sampled_from([1, 3, 8, 16]))
    issuer = d(st.sampled_from(["lanes", "warps", "for"]))
    quiet_first = d(st.booleans())
    dst = "recv[0 : block]" if mutation == "same_dst" else "recv[me*block : (me+1)*block]"
    quiet = "" if mutation == "drop_quiet" else "        quiet(p)\n"
    wait = "" if mutation == "drop_wait" else "        wait_signal(p, queue=0)\n"
    body = (quiet + wait) if quiet_first else (wait + quiet)
    text = f'''protocol exchange(block: bytes = {block}):
    team lsa
    between_launches: host_sync
    window send: nranks * block
    window recv: nranks * block

    kernel go(threads=256):
        {issuer} p in peers():
            put(p, dst={dst}, src=send[p*block : (p+1)*block], queue=0, signal="remote")
{_indent(body, 4)}
    ensure:
        for p in peers():
            recv[p*block : (p+1)*block] == init(send@p)[me*block : (me+1)*block]
'''
    return Gen(text, (2, 3), "exchange", mutation)


def _shift(d: st.DrawFn, mutation: str) -> Gen:
    size = d(st.sampled_from([1, 4, 8]))
    rounds = d(st.integers(1, 3))
    k = d(st.sampled_from([1, -1]))
    q = 1 if mutation == "other_queue" else 0
    wait = "" if mutation == "drop_wait" else \
        f"        for r in range({rounds}):\n" \
        f"            wait_signal((me - ({k})) % nranks, queue=0)\n"
    quiet = "" if mutation == "drop_quiet" else f"        quiet((me + ({k})) % nranks)\n"
    text = f'''protocol shift(size: bytes = {size}):
    team lsa
    queues 2
    between_launches: host_sync
    window send: {rounds} * size
    window recv: {rounds} * size

    kernel go(threads=32):
        for r in range({rounds}):
            put((me + ({k})) % nranks, dst=recv[r*size : (r+1)*size],
                src=send[r*size : (r+1)*size], queue={q}, signal="remote")
{wait}{quiet}
    ensure:
        for r in range({rounds}):
            recv[r*size : (r+1)*size] == init(send@((me - ({k})) % nranks))[r*size : (r+1)*size]
'''
    return Gen(text, (2, 3), "shift", mutation)


def _pingpong(d: st.DrawFn, mutation: str) -> Gen:
    size = d(st.sampled_from([1, 4, 8]))
    rounds = d(st.integers(1, 3))
    wait0 = "" if mutation == "drop_wait" else "                wait_signal(1)\n"
    quiet = "" if mutation == "drop_quiet" else "                quiet(1)\n"
    text = f'''protocol pingpong(size: bytes = {size}):
    team lsa(2)
    between_launches: host_sync
    window ping: size
    window pong: size

    kernel bounce(threads=32):
        for r in range({rounds}):
            if me == 0:
                put(1, dst=ping, src=ping, signal="remote")
{wait0}{quiet}            else:
                wait_signal(0)
                put(0, dst=pong, src=ping, signal="remote")
                quiet(0)

    ensure:
        ping == init(ping@0)
        if me == 0:
            pong == init(ping@0)
'''
    return Gen(text, (2,), "pingpong", mutation)


def _gather(d: st.DrawFn, mutation: str) -> Gen:
    block = d(st.sampled_from([1, 4, 16]))
    dst = "gather[0 : block]" if mutation == "same_dst" else "gather[me*block : (me+1)*block]"
    wait = "" if mutation == "drop_wait" else "            wait_count(landed)\n"
    copy = "            copy(dst=gather[0 : block], src=send)\n"
    own = (wait + copy) if mutation != "read_early" else (copy + wait)
    text = f'''protocol gather(block: bytes = {block}):
    team lsa
    between_launches: host_sync
    window send: block
    window gather: nranks * block
    counter landed

    kernel go(threads=32):
        if me != 0:
            put(0, dst={dst}, src=send, queue=0, count=landed)
            quiet(0)
        else:
{own}
    ensure:
        if me == 0:
            for r in ranks():
                gather[r*block : (r+1)*block] == init(send@r)
'''
    return Gen(text, (2, 3), "gather", mutation)


def _pipeline(d: st.DrawFn, mutation: str) -> Gen:
    chunk = d(st.sampled_from([1, 2, 8]))
    per = d(st.integers(1, 2))
    signal_q = "1 - w" if mutation == "other_queue" else "w"
    wait = "" if mutation == "drop_wait" else "                wait_signal(0, queue=w)\n"
    copy = "                copy(dst=out[(2*i + w)*chunk : (2*i + w + 1)*chunk], " \
           "src=stage[(2*i + w)*chunk : (2*i + w + 1)*chunk])\n"
    recv = (copy + wait) if mutation == "read_early" else (wait + copy)
    text = f'''protocol pipeline(chunk: bytes = {chunk}):
    team lsa(2)
    queues 2
    between_launches: host_sync
    window src: {2 * per} * chunk
    window stage: {2 * per} * chunk
    window out: {2 * per} * chunk

    kernel go(threads=64):
        if me == 0:
            warps w in range(2):
                for i in range({per}):
                    put(1, dst=stage[(2*i + w)*chunk : (2*i + w + 1)*chunk],
                        src=src[(2*i + w)*chunk : (2*i + w + 1)*chunk], queue=w)
                    put(1, dst=stage[(2*i + w)*chunk : (2*i + w)*chunk + 1],
                        src=src[(2*i + w)*chunk : (2*i + w)*chunk + 1], queue={signal_q},
                        signal="remote")
                quiet(1)
        else:
            for i in range({per}):
                for w in range(2):
{_indent(recv, 4)}
    ensure:
        if me == 1:
            out == init(src@0)
'''
    return Gen(text, (2,), "pipeline", mutation)


SHAPES = {"exchange": (_exchange, ("none", "drop_wait", "drop_quiet", "same_dst")),
          "shift": (_shift, ("none", "drop_wait", "drop_quiet", "other_queue")),
          "pingpong": (_pingpong, ("none", "drop_wait", "drop_quiet")),
          "gather": (_gather, ("none", "drop_wait", "read_early", "same_dst")),
          "pipeline": (_pipeline, ("none", "drop_wait", "read_early", "other_queue"))}


def _indent(text: str, spaces: int) -> str:
    pad = " " * spaces
    return "".join(pad + line if line.strip() else line for line in text.splitlines(True))


@st.composite
def protocols(draw: st.DrawFn, mutate: bool = False) -> Gen:
    shape = draw(st.sampled_from(sorted(SHAPES)))
    build, mutations = SHAPES[shape]
    mutation = draw(st.sampled_from((*mutations, "back_to_back"))) if mutate else "none"
    g = build(draw, mutation)
    if mutation == "back_to_back":
        g = Gen(g.text.replace("    between_launches: host_sync\n", ""), g.ranks, g.shape,
                mutation)
    return g
