"""THE registry of diagnostic codes: code -> slug, severity, summary, explain text.

Codes are never reused.  `E0xx` are errors (the protocol hangs, corrupts data or is
rejected), `W1xx` performance warnings.  The explain text of each rule is Markdown with
four sections: `## What it catches`, `## Why it matters` (with the figure a warning
rests on), `## Example` (a failing `.cco` snippet) and `## Fixed` (the corrected
snippet).  `ccogen explain CODE` prints `explain_text(CODE)`.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from ccogen.diag import Severity


@dataclass(frozen=True, slots=True)
class Rule:
    code: str
    slug: str
    summary: str
    explain: str

    @property
    def severity(self) -> Severity:
        return Severity.ERROR if self.code.startswith("E") else Severity.WARNING


def _doc(text: str) -> str:
    """Dedent and strip an explain text written as an indented triple-quoted string."""
    return textwrap.dedent(text).strip("\n")


_EXPLAIN: dict[str, str] = {
    "E001": _doc("""
        ## What it catches

        Text the parser cannot read: a block header without its `:`, an unclosed
        bracket, an indentation that matches no enclosing block, a keyword used as a
        name.  The caret points at the first token that does not fit, and the message
        lists the tokens that would have.

        ## Why it matters

        Nothing can be checked, simulated or generated until the file parses.

        ## Example

        ```python
        kernel exchange(threads=64)
            lanes p in peers():
                put(p, dst=recv[0:64], src=send[0:64], queue=0, signal="remote")
        ```

        ## Fixed

        ```python
        kernel exchange(threads=64):
            lanes p in peers():
                put(p, dst=recv[0:64], src=send[0:64], queue=0, signal="remote")
        ```
    """),
    "E002": _doc("""
        ## What it catches

        A name that was never declared (window, counter, parameter, loop variable), an
        argument an op does not take or a value it does not accept (`signal="remtoe"`),
        a value of the wrong type (a window where a rank is expected), or two
        declarations of one name.

        ## Why it matters

        The protocol does not say what you meant, so ccogen cannot guess which buffer,
        rank or option to use.  The message names the bad item and, where it can, the
        closest valid spelling.

        ## Example

        ```python
        window send: 4 KiB
        window recv: 4 KiB

        kernel push(threads=32):
            put(1, dst=recv, src=snd, queue=0, signal="remtoe")
        ```

        ## Fixed

        ```python
        window send: 4 KiB
        window recv: 4 KiB

        kernel push(threads=32):
            put(1, dst=recv, src=send, queue=0, signal="remote")
        ```
    """),
    "E003": _doc("""
        ## What it catches

        A region `w[a : b]` that reaches outside window `w`, is negative or empty
        (`b <= a`), or a `put`/`get`/`copy` whose `dst` and `src` differ in length.
        Regions are half-open byte ranges, checked for every team size the protocol
        is instantiated for.

        ## Why it matters

        An out-of-bounds write corrupts whatever lies after the window on the peer,
        and mismatched lengths have no meaning: the device APIs take one byte count
        per op.

        ## Example

        ```python
        window send: 64
        window recv: 64

        kernel push(threads=32):
            put(1, dst=recv[0:128], src=send[0:64], queue=0)
        ```

        ## Fixed

        ```python
        window send: 64
        window recv: 64

        kernel push(threads=32):
            put(1, dst=recv[0:64], src=send[0:64], queue=0)
        ```
    """),
    "E004": _doc("""
        ## What it catches

        A loop bound, condition, rank or region expression that cannot be turned into
        an integer when the protocol is instantiated: a division or modulo by zero for
        some team size, a negative `range` step, a value that would depend on the
        contents of a window.

        ## Why it matters

        Every op instance must know its rank, issuer, queue and regions before any
        check or code generation runs: control flow is resolved at instantiation, with
        no data dependence.  `ccogen lint` instantiates for team sizes 2, 3, 4 and 8 by
        default, so an expression that only breaks for one of them is still reported.

        ## Example

        ```python
        protocol split(block: bytes = 1 MiB):
            team lsa
            window send: block
            window recv: block

            kernel push(threads=32):
                put((me + 1) % nranks, dst=recv[0 : block // (nranks - 2)],
                    src=send[0 : block // (nranks - 2)], queue=0)
        ```

        ## Fixed

        ```python
                put((me + 1) % nranks, dst=recv[0 : block // nranks],
                    src=send[0 : block // nranks], queue=0)
        ```
    """),
    "E005": _doc("""
        ## What it catches

        A kernel whose `threads=` does not cover the lanes or warps its issuer blocks
        use, or whose `threads=`/`blocks=` exceed what the device can launch.

        ## Why it matters

        `lanes x in range(64)` needs 64 threads.  With 32, lanes 32 to 63 do not
        exist: their ops are never issued and the receivers wait forever.  Over the
        device limit the launch itself fails.

        ## Example

        ```python
        kernel ship(threads=32):
            lanes i in range(64):
                put(1, dst=recv[i*64 : (i+1)*64], src=send[i*64 : (i+1)*64], queue=0)
        ```

        ## Fixed

        ```python
        kernel ship(threads=64):
            lanes i in range(64):
                put(1, dst=recv[i*64 : (i+1)*64], src=send[i*64 : (i+1)*64], queue=0)
        ```
    """),
    "E006": _doc("""
        ## What it catches

        An input over a documented resource limit, found before the work that would
        exhaust the machine: a team over 1,024 ranks, over 1,000,000 op instances or
        4,000,000 loop iterations, a window over 1 TiB, windows the simulator would
        hold past 1 GiB, clocks past 2 GiB, or source nested past 128 levels.  The help
        names the `--limit NAME=N` that raises it (nesting is fixed).

        ## Why it matters

        Checking keeps clocks that grow with the square of the team (8,192 ranks took
        14 GB), and the simulator holds every window of every rank: without the
        limits a mistyped parameter ends in an out-of-memory kill, not a message
        (docs/reliability.md).

        ## Example

        ```python
        window send: block * 1024 * 1024 * 1024 * 1024
        ```

        ## Fixed

        ```python
        window send: block * 1024
        ```
    """),
    "E010": _doc("""
        ## What it catches

        A `put`/`get` peer (or a `wait_signal` source) that is not a rank of the team
        for some instance, such as `me + 1` on the last rank, or `me` itself used as
        the peer of a `put` or `get`.

        ## Why it matters

        There is no such peer: the device APIs do not check the rank, so the op
        addresses memory that belongs to no window.  A move to one's own memory is
        a `copy`; use `% nranks` to wrap around a ring.

        ## Example

        ```python
        kernel ring(threads=32):
            put(me + 1, dst=recv, src=send, queue=0, signal="remote")
            wait_signal(me - 1, queue=0)
        ```

        ## Fixed

        ```python
        kernel ring(threads=32):
            put((me + 1) % nranks, dst=recv, src=send, queue=0, signal="remote")
            wait_signal((me - 1) % nranks, queue=0)
        ```
    """),
    "E011": _doc("""
        ## What it catches

        A world rank where an LSA (node-local) rank is required: in a `team world`
        protocol, `wait_signal(me, ...)`, a wait on one's own local-completion slot.
        (`team world` on a one-node target such as `mori-sdma` is E042 instead.)

        ## Why it matters

        Own-slot signals are the copy engine's node-local completion mechanism, indexed
        by LSA rank (MORI `signalBuf[lsaRank * n + q]`).  World and LSA ranks only
        coincide on a single node, so the bug hides in single-node tests and then
        `waitSignal` never returns (MORI: `comm.rank` passed where `comm.lsaRank` was
        meant).

        ## Example

        ```python
        team world

        kernel push(threads=32):
            put((me + 1) % nranks, dst=recv, src=send, queue=0, signal="local")
            wait_signal(me, queue=0)
        ```

        ## Fixed

        ```python
        team lsa

        kernel push(threads=32):
            put((me + 1) % nranks, dst=recv, src=send, queue=0, signal="local")
            wait_signal(me, queue=0)
        ```

        Across nodes, keep `team world` and wait with `quiet((me + 1) % nranks)`.
    """),
    "E012": _doc("""
        ## What it catches

        A `queue=` id that is negative or at or above the declared `queues N` (or the
        count `queues auto` chose), on any op that names a queue; and, with
        `--target`, a queue count above the target's cap (8 on `mori-sdma`; the other
        targets emulate queues and have no cap).  Ids chosen by `queue=auto` are always
        in range.

        ## Why it matters

        On MORI SDMA an out-of-range queue id is a silent no-op: the put is never sent
        and the receiver waits forever.  Above the cap, the runtime clamps the count
        with a warning, so ids that were valid in the protocol stop working.

        ## Example

        ```python
        queues 2

        kernel push(threads=32):
            put(1, dst=recv[0:64], src=send[0:64], queue=0)
            put(1, dst=recv[64:128], src=send[64:128], queue=2)
        ```

        ## Fixed

        ```python
        queues 2

        kernel push(threads=32):
            put(1, dst=recv[0:64], src=send[0:64], queue=0)
            put(1, dst=recv[64:128], src=send[64:128], queue=1)
        ```
    """),
    "E013": _doc("""
        ## What it catches

        `mode="same_queue"` on a `put`/`get` issued by lanes that, for some instance,
        do not all target the same `(peer, queue)`.

        ## Why it matters

        Same-queue mode reserves one block of slots for the whole group on one queue.
        If lanes differ, they write slots reserved on another lane's queue: silent
        data corruption in release builds, a trap only under `MORI_CCO_SDMA_DEBUG`
        ("wrong data with several lanes per wave").

        ## Example

        ```python
        kernel exchange(threads=64):
            lanes p in peers():
                put(p, dst=recv[me*64 : (me+1)*64], src=send[p*64 : (p+1)*64],
                    queue=0, mode="same_queue")
        ```

        ## Fixed

        ```python
        kernel exchange(threads=64):
            lanes p in peers():
                put(p, dst=recv[me*64 : (me+1)*64], src=send[p*64 : (p+1)*64],
                    queue=0, mode="independent")
        ```
    """),
    "E014": _doc("""
        ## What it catches

        `mode="same_queue"` or `mode="independent"` on a `put`/`get` issued by a warp
        (`warps w in ...`) or by a block (kernel top level, `blocks b in ...`).  Thread
        modes only exist for lanes; `mode="auto"` (the default) is always accepted.

        ## Why it matters

        Warp and block issuers are leader-only: one lane posts a single copy for the
        group, so there is nothing to group.  The MORI API rejects the combination
        with a `static_assert`, so the generated code would not compile.

        ## Example

        ```python
        kernel push(threads=128):
            warps w in range(4):
                put(1, dst=recv[w*64 : (w+1)*64], src=send[w*64 : (w+1)*64],
                    queue=0, mode="same_queue")
        ```

        ## Fixed

        ```python
        kernel push(threads=128):
            warps w in range(4):
                put(1, dst=recv[w*64 : (w+1)*64], src=send[w*64 : (w+1)*64], queue=0)
        ```
    """),
    "E020": _doc("""
        ## What it catches

        A `put`/`get` with `aggregate=True` that is not rung by a `commit` on its
        `(peer, queue)` before a `quiet` or `wait_signal` that depends on it, or that
        is never committed before the kernel ends.

        ## Why it matters

        Aggregate ops are posted without ringing the doorbell; the engine does not
        start them until `commit`.  `quiet` drains only to the last rung packet, so it
        returns with nothing sent and the data is stale ("`quiet` returns but data is
        stale"); a receiver's wait never completes.

        ## Example

        ```python
        if me == 0:
            for i in range(8):
                put(1, dst=recv[i*chunk : (i+1)*chunk], src=send[i*chunk : (i+1)*chunk],
                    queue=0, aggregate=True)
            quiet(1)
        ```

        ## Fixed

        ```python
        if me == 0:
            for i in range(8):
                put(1, dst=recv[i*chunk : (i+1)*chunk], src=send[i*chunk : (i+1)*chunk],
                    queue=0, aggregate=True)
            commit(1, queue=0)
            quiet(1)
        ```
    """),
    "E021": _doc("""
        ## What it catches

        A `wait_signal(src, queue=Q)` that expects more increments than `src` ever
        sends to this rank on queue `Q` in one epoch: a hand-written `expected=` that
        is too high, or a wait with no signalled put left to pair with.

        ## Why it matters

        The comparison is `>=` on a slot that only grows, so the wait never returns and
        the kernel hangs (`waitSignal` never returns).  The notes name the signalled
        puts that do reach the slot and the total they add up to.

        ## Example

        ```python
        if me == 0:
            put(1, dst=recv, src=send, queue=0, signal="remote")
        else:
            wait_signal(0, queue=0, expected=2)
        ```

        ## Fixed

        ```python
        if me == 0:
            put(1, dst=recv, src=send, queue=0, signal="remote")
        else:
            wait_signal(0, queue=0)
        ```

        With `expected` omitted, the k-th wait on a `(src, queue)` pair expects k.
    """),
    "E022": _doc("""
        ## What it catches

        Hand-written `expected=` values that decrease over successive waits on one
        `(src, queue)` pair, or one running total carried across several queues.

        ## Why it matters

        Signal slots count per `(sender, queue)` and are never reset.  A total shared
        across queues asks one slot for increments that land in another, so the wait
        never returns ("`expected` shared across queues"); a decreasing value is
        already met and orders nothing.

        ## Example

        ```python
        if me == 0:
            put(1, dst=recv[0:64], src=send[0:64], queue=0, signal="remote")
            put(1, dst=recv[64:128], src=send[64:128], queue=1, signal="remote")
        else:
            wait_signal(0, queue=0, expected=1)
            wait_signal(0, queue=1, expected=2)
        ```

        ## Fixed

        ```python
        else:
            wait_signal(0, queue=0, expected=1)
            wait_signal(0, queue=1, expected=1)
        ```
    """),
    "E023": _doc("""
        ## What it catches

        A wait whose `expected` counts one increment per lane while the sending lanes
        signal once per `put` call as a group, or the reverse: the sender sets
        `signal_per_copy=True` and the receiver expects one increment per group.

        ## Why it matters

        A group of lanes advances the slot by one per `put()` call however many lanes
        joined, so expecting the lane count hangs ("`expected` counted per lane").  In
        the reverse case the wait returns after the first copy and the rank reads data
        that has not arrived.

        ## Example

        ```python
        if me == 0:
            lanes i in range(32):
                put(1, dst=recv[i*c : (i+1)*c], src=send[i*c : (i+1)*c],
                    queue=0, signal="remote")
        else:
            wait_signal(0, queue=0, expected=32)
        ```

        ## Fixed

        ```python
        else:
            wait_signal(0, queue=0, expected=1)
        ```
    """),
    "E024": _doc("""
        ## What it catches

        Data that a rank reads (a later op's `src`, a `copy`, an `ensure`) whose
        arrival is announced by a signal on a different queue than the put that
        carries the data.

        ## Why it matters

        Ops on one queue complete in order, so a signal proves the arrival of the data
        ahead of it on the same queue only.  Queues are unordered with respect to each
        other: the receiver sees the signal but stale data.

        ## Example

        ```python
        if me == 0:
            put(1, dst=recv[0:4096], src=send[0:4096], queue=0)
            put(1, dst=recv[4096:4160], src=send[4096:4160], queue=1, signal="remote")
        else:
            wait_signal(0, queue=1)
            copy(dst=out[0:4096], src=recv[0:4096])
        ```

        ## Fixed

        ```python
        if me == 0:
            put(1, dst=recv[0:4096], src=send[0:4096], queue=0)
            put(1, dst=recv[4096:4160], src=send[4096:4160], queue=0, signal="remote")
        else:
            wait_signal(0, queue=0)
            copy(dst=out[0:4096], src=recv[0:4096])
        ```
    """),
    "E025": _doc("""
        ## What it catches

        A source region that is written (by a `copy`, a `get` or an incoming put) or
        reused as a destination before the op that reads it has completed, that is,
        with no `quiet` or wait on its local signal in between.

        ## Why it matters

        `put` and `get` are non-blocking: nothing has been read when they return.  The
        engine may copy the new bytes instead of the old ones ("do not reuse a source
        before the op completes").

        ## Example

        ```python
        if me == 0:
            put(1, dst=inbox, src=stage, queue=0, signal="remote")
            copy(dst=stage, src=table[0:4096])
        ```

        ## Fixed

        ```python
        if me == 0:
            put(1, dst=inbox, src=stage, queue=0, signal="remote")
            quiet(1, queue=0)
            copy(dst=stage, src=table[0:4096])
        ```
    """),
    "E026": _doc("""
        ## What it catches

        A `wait_count(C, expected=E)` whose `E` is more bytes than counted puts ever
        deliver to this rank's counter in one epoch, or a counter that is waited on
        but written by no `put(..., count=C)`.

        ## Why it matters

        A counted put adds its payload byte count, not 1, to the peer's counter.  A
        wait for bytes that never come never returns.  Omit `expected` to wait for the
        epoch's total, or give the total in bytes.

        ## Example

        ```python
        counter landed

        kernel bcast(threads=32):
            if me == 0:
                put(1, dst=payload[0:4096], src=payload[0:4096], queue=0, count=landed)
            else:
                wait_count(landed, expected=8192)
        ```

        ## Fixed

        ```python
                wait_count(landed, expected=4096)
        ```
    """),
    "E027": _doc("""
        ## What it catches

        A counter reset that may run while counted writes of the same epoch are still
        in flight toward it (no wait for their bytes orders the reset after them).

        ## Why it matters

        A reset does not synchronise with producers: a write that lands after it adds
        its bytes to the next epoch, so the next wait returns early on stale data, or
        the current wait never sees its total.  NVSHMEM allows a reset only at a
        protocol boundary.  ccogen never needs one: expected values advance across
        epochs by themselves.

        ## Example

        ```python
        if me == 0:
            put(1, dst=payload, src=payload, queue=0, count=landed)
        else:
            reset_count(landed)
            wait_count(landed)
        ```

        ## Fixed

        ```python
        if me == 0:
            put(1, dst=payload, src=payload, queue=0, count=landed)
        else:
            wait_count(landed)
        ```
    """),
    "E030": _doc("""
        ## What it catches

        A cycle of waits across ranks: every rank of the cycle waits for a signal that
        is only sent after its own wait.  Also `barrier()` reached a different number
        of times on different ranks or blocks.  The notes list one hop of the cycle
        each.

        ## Why it matters

        No schedule can make progress: the kernel hangs on every run.
        `ccogen simulate` shows the stuck state.

        ## Example

        ```python
        kernel ring(threads=32):
            wait_signal((me - 1) % nranks, queue=0)
            put((me + 1) % nranks, dst=recv, src=send, queue=0, signal="remote")
        ```

        ## Fixed

        ```python
        kernel ring(threads=32):
            put((me + 1) % nranks, dst=recv, src=send, queue=0, signal="remote")
            wait_signal((me - 1) % nranks, queue=0)
        ```
    """),
    "E031": _doc("""
        ## What it catches

        Two transfers that write overlapping bytes of one window on one rank with no
        happens-before order between them (no wait, quiet or barrier orders one after
        the other).

        ## Why it matters

        The engines run unordered queues in parallel, so the final bytes depend on the
        schedule: the result differs from run to run.

        ## Example

        ```python
        kernel gather(threads=32):
            if me != 0:
                put(0, dst=recv[0:64], src=send[0:64], queue=0, signal="remote")
        ```

        ## Fixed

        ```python
        kernel gather(threads=32):
            if me != 0:
                put(0, dst=recv[me*64 : (me+1)*64], src=send[0:64], queue=0,
                    signal="remote")
        ```
    """),
    "E032": _doc("""
        ## What it catches

        A rank that reads bytes (as a `src`, in a `copy` or in `ensure`) which a
        transfer writes, without a `wait_signal`, `wait_count` or `barrier` that
        orders the arrival first.

        ## Why it matters

        A put has landed only when a signal or counter after it says so.  Without the
        wait the read sees old bytes on some runs and new ones on others.

        ## Example

        ```python
        if me == 0:
            put(1, dst=recv, src=send, queue=0, signal="remote")
        else:
            copy(dst=out, src=recv)
        ```

        ## Fixed

        ```python
        if me == 0:
            put(1, dst=recv, src=send, queue=0, signal="remote")
        else:
            wait_signal(0, queue=0)
            copy(dst=out, src=recv)
        ```
    """),
    "E033": _doc("""
        ## What it catches

        An `ensure:` statement that does not hold: the symbolic result of the protocol
        (which initial bytes end up where) differs from the postcondition.  The
        message shows the first differing byte range and the rank and window its
        bytes actually came from.

        ## Why it matters

        The protocol runs without hanging but computes something other than what you
        stated; on a GPU this is silent data corruption.

        ## Example

        ```python
        kernel shift(threads=32):
            put((me + 1) % nranks, dst=recv, src=send, queue=0, signal="remote")
            wait_signal((me - 1) % nranks, queue=0)

        ensure:
            recv == init(send@((me + 1) % nranks))
        ```

        ## Fixed

        ```python
        ensure:
            recv == init(send@((me - 1) % nranks))
        ```
    """),
    "E040": _doc("""
        ## What it catches

        With `--target nccl-cft` (every `put`/`get`) or `nvshmem` (counted puts): a
        `src`/`dst` address (window base + offset) not 16-byte aligned, or a length
        not a multiple of 16.  Window bases sit on 256-byte boundaries (or `align=`),
        so offsets decide.  Counters must be 256-byte aligned; ccogen places them so.

        ## Why it matters

        CFT moves data in 16-byte units (`.b128`) and checks this only in debug
        builds; NVSHMEM's counted put returns `NVSHMEMX_ERROR_INVALID_VALUE`.

        ## Example

        ```python
        window send: 1000
        window recv: 1000

        kernel push(threads=128):
            put(1, dst=recv[4:1000], src=send[4:1000], queue=0)
        ```

        ## Fixed

        ```python
        window send: 1008
        window recv: 1008

        kernel push(threads=128):
            put(1, dst=recv[16:1008], src=send[16:1008], queue=0)
        ```
    """),
    "E041": _doc("""
        ## What it catches

        With `--target nccl-cft`: one block of a kernel issuing `barrier()` from
        several issuers at once, such as every warp of a `warps` block.  The CFT target
        requests one barrier slot per block (`reqs.cftBarrierCount = blocks`) and uses
        `blockIdx.x` as the barrier index, so a second concurrent barrier in a block
        would use an index at or over the requested count.

        ## Why it matters

        `ncclDevCommCreate` reserves exactly the requested CFT barrier slots, a fabric
        resource it must provide on every rank ("match the number of requested CFT
        barriers to the number of barrier slots used by the kernel").  A barrier on an
        index nobody requested has no slot behind it, so the ranks are not guaranteed to
        meet there.

        ## Example

        ```python
        kernel step(threads=128):
            warps w in range(4):
                put(1 - me, dst=dst[w*s : (w+1)*s], src=src[w*s : (w+1)*s])
                quiet(1 - me)
                barrier()
        ```

        ## Fixed

        ```python
        kernel step(threads=128):
            warps w in range(4):
                put(1 - me, dst=dst[w*s : (w+1)*s], src=src[w*s : (w+1)*s])
                quiet(1 - me)
            barrier()
        ```
    """),
    "E042": _doc("""
        ## What it catches

        With `--target`, a feature the target cannot lower: `team world` on a target
        that reaches only one node (`mori-sdma`, `nccl-lsa`), counted writes
        (`count=`, `wait_count`, `reset_count`) on a target without them (`mori-sdma`),
        `get` where a target has none.  The help names the targets that can, and how
        (native or emulated).

        ## Why it matters

        Every target declares its capabilities; ccogen refuses before generating code
        rather than emitting a kernel that cannot work.  MORI SDMA, for example,
        reaches only peers on the same node.

        ## Example

        ```python
        # ccogen compile shift.cco --target mori-sdma
        team world

        kernel shift(threads=32):
            put((me + 1) % nranks, dst=recv, src=send, queue=0, signal="remote")
        ```

        ## Fixed

        ```python
        # ccogen compile shift.cco --target mori-sdma
        team lsa

        kernel shift(threads=32):
            put((me + 1) % nranks, dst=recv, src=send, queue=0, signal="remote")
        ```

        Or keep `team world` and pick a target that reaches other nodes (`nvshmem`).
    """),
    "W100": _doc("""
        ## What it catches

        At least 8 puts under 256 KiB from one warp or block to one peer between two
        of its waits, after merging adjacent pieces (W101), unless the receiver
        consumes them one by one (a pipeline).  Without `--target` or on `mori-sdma`.

        ## Why it matters

        The copy engine costs about 2 µs per packet, nearly the same for 64 B as for
        4 KB.  On MI355X, 64 x 4 KB puts take 138 µs where the same 256 KB in one
        copy takes about 11 µs.  A local gather runs at ~7 TB/s, so packing first adds
        only a couple of percent.  Scatter directly only when pieces are large
        (≳ 1 MB), the compute units must stay free, or the data must land in place.

        ## Example

        ```python
        if me == 0:
            for i in range(64):
                put(1, dst=inbox[i*4096 : (i+1)*4096],
                    src=table[2*i*4096 : (2*i+1)*4096], queue=0)
            quiet(1)
        ```

        ## Fixed

        ```python
        if me == 0:
            for i in range(64):
                copy(dst=stage[i*4096 : (i+1)*4096], src=table[2*i*4096 : (2*i+1)*4096])
            put(1, dst=inbox, src=stage, queue=0)
            quiet(1)
        ```
    """),
    "W101": _doc("""
        ## What it catches

        Puts (or gets) of one warp or block to one peer, between two of its waits,
        whose sources and destinations tile one contiguous range each, on one queue or
        several.  Not a pipeline whose receiver reads a piece before waiting for the
        last one.  Without `--target` or on `mori-sdma`.

        ## Why it matters

        Bandwidth depends only on bytes per op.  On MI355X, 2 x 4 MB reach 57 GB/s
        where one 8 MB op reaches 60 GB/s, even on separate queues: one peer is one
        xGMI link, so extra queues gain nothing and every split costs.  Issue the
        largest contiguous copy you have.

        ## Example

        ```python
        window send: 8 MiB
        window recv: 8 MiB

        kernel push(threads=64):
            put(1, dst=recv[0 : 4 MiB], src=send[0 : 4 MiB], queue=0)
            put(1, dst=recv[4 MiB : 8 MiB], src=send[4 MiB : 8 MiB], queue=1)
        ```

        ## Fixed

        ```python
        window send: 8 MiB
        window recv: 8 MiB

        kernel push(threads=64):
            put(1, dst=recv, src=send, queue=0)
        ```
    """),
    "W102": _doc("""
        ## What it catches

        Several warps or blocks that post to one peer on the same queue concurrently
        (not ordered by program order: the warps of one `warps` block, say).  Without
        `--target` or on `mori-sdma`; the other targets emulate queues.

        ## Why it matters

        Issuers sharing a queue are correct but serialise on its in-order commit
        chain: on MI355X, 8 warps on one queue are about 3.2x slower than the same 8
        warps on 8 queues.  Give every issuing warp its own queue (`queues auto` with
        the default `queue=auto` does that).

        ## Example

        ```python
        queues 1

        kernel push(threads=512):
            warps w in range(8):
                put(1, dst=dst[w*stripe : (w+1)*stripe],
                    src=src[w*stripe : (w+1)*stripe], queue=0)
        ```

        ## Fixed

        ```python
        queues auto

        kernel push(threads=512):
            warps w in range(8):
                put(1, dst=dst[w*stripe : (w+1)*stripe],
                    src=src[w*stripe : (w+1)*stripe])
        ```
    """),
    "W103": _doc("""
        ## What it catches

        Lanes of one warp that post to the same peer on different queues.  Lanes that
        target different peers use different queues by definition and are fine.
        Without `--target` or on `mori-sdma`.

        ## Why it matters

        Queues buy parallelism between warps, not between lanes.  Each lane on its own
        queue issues its own uncached reservation and doorbell, which queue up in the
        memory pipeline: 8 lanes cost 3377 trigger cycles spread over 8 queues but
        2652 on one queue in same-queue mode, and 64 lanes on one queue cost 3220 (50
        per packet).

        ## Example

        ```python
        queues 8

        kernel ship(threads=32):
            lanes i in range(8):
                put(1, dst=recv[i*c : (i+1)*c], src=send[2*i*c : (2*i+1)*c], queue=i)
        ```

        ## Fixed

        ```python
        queues 1

        kernel ship(threads=32):
            lanes i in range(8):
                put(1, dst=recv[i*c : (i+1)*c], src=send[2*i*c : (2*i+1)*c], queue=0,
                    mode="same_queue")
        ```
    """),
    "W104": _doc("""
        ## What it catches

        A signalled `put` with `signal_per_copy=True` posted by two or more lanes of
        one warp (at warp or block scope, or for a single lane, the flag changes
        nothing).  Without `--target` or on `mori-sdma`.

        ## Why it matters

        Every copy then carries its own signal packet, and a signal costs the engine
        about what a copy does: on MI355X, 64 signalled copies take 248 µs instead of
        132 µs.  A group of lanes already signals once after all its copies; use
        per-copy signals only when a receiver must see copies land one at a time.

        ## Example

        ```python
        if me == 0:
            lanes i in range(32):
                put(1, dst=recv[i*c : (i+1)*c], src=send[2*i*c : (2*i+1)*c], queue=0,
                    signal="remote", signal_per_copy=True)
        else:
            wait_signal(0, queue=0, expected=32)
        ```

        ## Fixed

        ```python
        if me == 0:
            lanes i in range(32):
                put(1, dst=recv[i*c : (i+1)*c], src=send[2*i*c : (2*i+1)*c], queue=0,
                    signal="remote")
        else:
            wait_signal(0, queue=0)
        ```
    """),
    "W105": _doc("""
        ## What it catches

        A `commit(peer, queue=q)` ringing fewer than 8 or more than 16 `aggregate=True`
        ops posted to that `(peer, q)` since its last commit; doorbells are per
        `(peer, queue)`.  Without `--target` or on `mori-sdma`.

        ## Why it matters

        Aggregation amortises the doorbell over the batch; the MORI measurements put
        the sweet spot at 8-16 ops per commit.  Small batches pay the doorbell almost
        per op, and the engine starts nothing of a large batch until its commit.

        ## Example

        ```python
        if me == 0:
            for i in range(64):
                put(1, dst=recv[i*c : (i+1)*c], src=send[2*i*c : (2*i+1)*c], queue=0,
                    aggregate=True)
            commit(1, queue=0)
            quiet(1)
        ```

        ## Fixed

        ```python
        if me == 0:
            for i in range(64):
                put(1, dst=recv[i*c : (i+1)*c], src=send[2*i*c : (2*i+1)*c], queue=0,
                    aggregate=True)
                if i % 8 == 7:
                    commit(1, queue=0)
            quiet(1)
        ```
    """),
    "W106": _doc("""
        ## What it catches

        `mode="independent"` on a group of two or more lanes that all target one
        `(peer, queue)`; the instance note says for which team sizes that holds.
        Without `--target` or on `mori-sdma`.

        ## Why it matters

        Independent mode detects the lanes' shape at run time: +14 SGPR against +5 for
        same-queue mode, and no grouping unless it finds one.  Same-queue lanes post
        as one group, one reservation and one doorbell: 64 lanes cost 3220 trigger
        cycles against 2244 for one, 45x cheaper per packet.  `mode="auto"` (the
        default) picks it whenever the compiler can prove it.

        ## Example

        ```python
        kernel ship(threads=32):
            lanes i in range(32):
                put(1, dst=recv[i*c : (i+1)*c], src=send[2*i*c : (2*i+1)*c], queue=0,
                    mode="independent")
        ```

        ## Fixed

        ```python
        kernel ship(threads=32):
            lanes i in range(32):
                put(1, dst=recv[i*c : (i+1)*c], src=send[2*i*c : (2*i+1)*c], queue=0)
        ```
    """),
    "W107": _doc("""
        ## What it catches

        A `queues N` declaration with more queues than both the protocol's issuers
        toward one peer (warps or blocks posting to it in one kernel) and the queue
        ids its ops name: some queues can never carry anything.  `queues auto` never
        warns.  Without `--target` or on `mori-sdma`.

        ## Why it matters

        Queues do not make a single transfer faster: they only let independent issuers
        proceed in parallel.  Unused queues still cost: `quiet(peer)` polls every queue
        toward the peer with one uncached read each, so `queues 8` with one issuer
        makes every `quiet` do 8 reads where 1 would do, and the queues are a
        per-communicator resource capped at 8 on MORI SDMA.  `queues auto` sets the
        count to the number of concurrent issuers.

        ## Example

        ```python
        queues 8

        kernel push(threads=32):
            put(1, dst=recv, src=send, queue=0)
            quiet(1)
        ```

        ## Fixed

        ```python
        queues 1

        kernel push(threads=32):
            put(1, dst=recv, src=send, queue=0)
            quiet(1)
        ```
    """),
}

_RULES: tuple[Rule, ...] = tuple(
    Rule(code, slug, summary, _EXPLAIN[code])
    for code, slug, summary in (
        ("E001", "syntax-error", "syntax error"),
        (
            "E002",
            "bad-name-or-argument",
            "unknown name, wrong argument, wrong type or duplicate declaration",
        ),
        ("E003", "bad-region", "region out of bounds, empty, or `dst`/`src` lengths differ"),
        (
            "E004",
            "unresolvable-expression",
            "loop or expression that cannot be resolved at instantiation",
        ),
        (
            "E005",
            "bad-thread-count",
            "`threads=`/`blocks=` too small for the issuers used, or over the device limit",
        ),
        (
            "E006",
            "limit-exceeded",
            "team size, op instances, window or memory bytes, or nesting over a documented limit",
        ),
        ("E010", "peer-outside-team", "peer outside the team, or `me` used as a peer"),
        ("E011", "world-rank-for-lsa", "a world rank where an LSA rank is required"),
        (
            "E012",
            "queue-out-of-range",
            "queue id at or over the queue count, or queue count over the backend cap",
        ),
        (
            "E013",
            "broken-same-queue-promise",
            '`mode="same_queue"` promised but lanes differ in peer or queue',
        ),
        ("E014", "mode-on-group-issuer", "`mode=` given for a warp or block issuer"),
        (
            "E020",
            "uncommitted-aggregate",
            "aggregate op not committed before the quiet or wait that depends on it",
        ),
        ("E021", "unsatisfiable-wait", "`wait_signal` expects more signals than are ever sent"),
        (
            "E022",
            "non-monotonic-expected",
            "hand-written `expected` not monotonic per (src, queue), or shared across queues",
        ),
        (
            "E023",
            "expected-per-lane",
            "`expected` counted per lane while the sender signals once per group (or the reverse)",
        ),
        (
            "E024",
            "signal-on-other-queue",
            "data announced by a signal on a different queue than the copy that carries it",
        ),
        (
            "E025",
            "source-reused-early",
            "source region written or reused before the op reading it completed",
        ),
        (
            "E026",
            "unsatisfiable-count",
            "`wait_count` expects more bytes than are ever counted,"
            " or a counter without counted puts",
        ),
        (
            "E027",
            "counter-reset-in-flight",
            "counter reset while counted writes of the same epoch may be in flight",
        ),
        ("E030", "deadlock", "a cycle of waits across ranks, or barriers reached unequally"),
        (
            "E031",
            "write-write-race",
            "two transfers write overlapping bytes with no order between them",
        ),
        ("E032", "read-before-arrival", "bytes read before a wait orders their arrival"),
        ("E033", "postcondition-fails", "the result of the protocol differs from `ensure`"),
        (
            "E040",
            "cft-misaligned",
            "CFT operand not 16-byte aligned, length not a multiple of 16,"
            " or counter not 256-byte aligned",
        ),
        ("E041", "cft-barrier-index", "CFT barrier index at or over the requested barrier count"),
        ("E042", "unsupported-by-backend", "operation the chosen backend cannot lower"),
        ("W100", "many-small-copies", "many small copies to one peer: pack locally and send once"),
        ("W101", "split-transfer", "one contiguous transfer split into several ops"),
        ("W102", "shared-queue-issuers", "several warps or blocks issue concurrently on one queue"),
        ("W103", "lanes-over-queues", "lanes of one warp spread over several queues"),
        ("W104", "signal-per-copy", "`signal_per_copy=True` costs a packet per copy"),
        ("W105", "aggregate-batch-size", "aggregate batch outside 8-16 ops per commit"),
        ("W106", "independent-mode-provable", '`mode="independent"` where same-queue is provable'),
        ("W107", "too-many-queues", "more queues declared than concurrent issuers need"),
    )
)

RULES: dict[str, Rule] = {rule.code: rule for rule in _RULES}
_BY_NAME: dict[str, Rule] = {
    **{rule.slug: rule for rule in _RULES},
    **{rule.code.lower(): rule for rule in _RULES},
}


def lookup(name: str) -> Rule:
    """The rule named by a code (`E021`, `e021`) or a slug (`unsatisfiable-wait`).

    Raises `KeyError` for an unknown name.
    """
    rule = _BY_NAME.get(name.strip().lower())
    if rule is None:
        raise KeyError(name)
    return rule


def explain_text(name: str) -> str:
    """`ccogen explain` output: `CODE (slug): summary`, a blank line, the explain text."""
    rule = lookup(name)
    return f"{rule.code} ({rule.slug}): {rule.summary}\n\n{rule.explain}"


__all__ = ["RULES", "Rule", "explain_text", "lookup"]
