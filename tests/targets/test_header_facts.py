"""The target facts the checker and the code generators rely on, each with its header line.

Every test cites the line of the installed vendor header (MORI `cco.hpp`, NCCL
`nccl_device`, NVSHMEM 3.8) that states the behaviour, then shows that ccogen acts on
it: a protocol that would hang or corrupt data on that hardware is rejected, or the
generated code does what the header requires.  A missing toolchain skips the test with
what to install (see `tests.targets.headers`).
"""

from __future__ import annotations

from pathlib import Path

import ccogen as cg
from ccogen.targets import get_target
from tests.helpers import REPO_ROOT
from tests.targets.headers import cite, mori

LINT = REPO_ROOT / "tests" / "lint"


def codes(path: Path, **options: object) -> set[str]:
    result = cg.check(path.read_text(encoding="utf-8"), **options)  # type: ignore[arg-type]
    return {d.code for d in result.diagnostics if d.is_error}


# ============================================================================= MORI


def test_mori_waves_are_64_lanes_and_a_block_has_at_most_1024_threads() -> None:
    """`CCO_WAVE32` is set for gfx1250 only: gfx942/gfx950 warps are 64-lane waves."""
    cited = cite(mori(), r"#if defined\(__gfx1250__\)\s*\n#define CCO_WAVE32 1", span=2)
    assert "CCO_WAVE32" in str(cited)
    caps = get_target("mori-sdma")
    assert caps.warp_threads == 64 and caps.max_block_threads == 1024
    # 32 IR warps are 32 waves: 2048 threads, never clamped to 1024
    assert codes(LINT / "E005-waves-over-the-block.cco", target="mori-sdma") == {"E005"}
    assert codes(LINT / "E005-waves-over-the-block.cco", target="nccl-lsa") == set()
    assert codes(LINT / "E005-waves-over-the-block-ok.cco", target="mori-sdma") == set()


def test_mori_lanes_group_per_peer_and_queue_so_local_signals_count_per_group() -> None:
    """Thread-scope lanes are grouped by `queueKey = peer * n + queueId`; each group
    signals once, into the sender's slot `[myLsaRank * n + q]` for a local signal."""
    cite(mori(), r"queueKey = static_cast<uint32_t>\(peer\) \* n \+ static_cast<uint32_t>"
                 r"\(queueId\)")
    cite(mori(), r"if constexpr \(localSignal\) localTarget = s\.signalBuf \+ slot;")
    cite(mori(), r"One signal for the group, after every copy in it\.")
    assert codes(LINT / "E025-local-signal-per-peer.cco", ranks=(3,)) == {"E025"}
    assert codes(LINT / "E025-local-signal-per-peer-ok.cco", ranks=(3,)) == set()
