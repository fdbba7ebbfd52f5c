"""The target facts the checker and the code generators rely on, each with its header line.

Every test cites the line of the installed vendor header (MORI `cco.hpp`, NCCL
`nccl_device`, NVSHMEM 3.8) that states the behaviour, then shows that ccogen acts on
it: a protocol that would hang or corrupt data on that hardware is rejected, or the
generated code does what the header requires.  A missing toolchain skips the test with
what to install (see `tests.targets.headers`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import ccogen as cg
from ccogen.targets import get_target
from tests.helpers import REPO_ROOT
from tests.targets.headers import cite, mori, nccl, nvshmem

LINT = REPO_ROOT / "tests" / "lint"


def codes(path: Path, **options: object) -> set[str]:
    result = cg.check(path.read_text(encoding="utf-8"), **options)  # type: ignore[arg-type]
    return {d.code for d in result.diagnostics if d.is_error}


# ============================================================================= MORI


def test_mori_waves_are_64_lanes_and_a_block_has_at_most_1024_threads() -> None:
    """`CCO_WAVE32` is set for gfx1250 only: gfx942/gfx950 warps are 64-lane waves."""
    cited = cite(mori(), r"#if defined\(__gfx1250__\)\s*\n#define CCO_WAVE32 1", span=2)
    assert "CCO_WAVE32" in str(cited)
    caps = get_target("mori-sdma").capabilities
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


def test_mori_a_plain_op_waits_behind_uncommitted_aggregate_ops() -> None:
    """`submitPacket` spins until the committed pointer equals the op's own slot, and only
    `commit` (`ccoSdmaRingQueueDbr`) moves it past reserved aggregate ops."""
    cite(mori(), r"while \(__hip_atomic_load\(impl::global\(committedWptr\), __ATOMIC_RELAXED,"
                 r"\s*\n\s*__HIP_MEMORY_SCOPE_AGENT\) != base\)", span=2)
    cite(mori(), r"constexpr bool kRing = !\(optFlags & ccoSdmaOptFlagsAggregate\);")
    assert codes(LINT / "E020-plain-behind-batch.cco") == {"E020"}
    assert codes(LINT / "E020-plain-behind-batch-ok.cco") == set()


def test_mori_commit_rings_everything_reserved_on_the_queue() -> None:
    """`ccoSdmaRingQueueDbr` rings from the committed pointer to the reservation pointer
    (`cachedWptr`): every issuer's reserved slot, written or not."""
    cite(mori(), r"// Ring the doorbell for everything placed-but-not-rung on this queue\.")
    cite(mori(), r"uint64_t pending = __hip_atomic_load\(impl::global\(handle\.cachedWptr\)")
    cite(mori(), r"if \(pending != base\) handle\.submitPacket\(base, pending\);")
    assert codes(LINT / "E028-shared-queue-doorbell.cco") == {"E028"}
    assert codes(LINT / "E028-shared-queue-doorbell-ok.cco") == set()


# ============================================================================= NCCL CFT

GET_AFTER_COPY = """
protocol fetch(size: bytes = 4 KiB):
    team lsa(2)
    window x: size
    window fresh: size
    window out: size
    window note: 16

    kernel k(threads=64):
        if me == 1:
            copy(dst=x, src=fresh)
            put(0, dst=note, src=note, queue=0, signal="remote")
            quiet(0)
        else:
            wait_signal(1, queue=0)
            get(1, dst=out, src=x, queue=0, signal="local")
            wait_signal(0, queue=0)
        barrier()

    ensure:
        if me == 0:
            out == init(fresh@1)
"""


def _generated(text: str, target: str, arch: str | None = None) -> str:
    from ccogen.compiler import compile_protocol
    from ccogen.syntax import parse_ir

    return compile_protocol(parse_ir(text, "p.cco"), target, source="p.cco", ranks=2,
                            arch=arch).files["kernels.cu"]


def test_cft_a_peer_get_of_generic_stores_needs_the_generic_to_fabric_fence() -> None:
    """`ncclMemFence(release, Generic, Fabric, Sys)` is the `fence.proxy.fabric::generic`
    release: what a `copy` stored must be released to the fabric proxy before the signal
    after which the peer's `cft.get` reads it."""
    cite(nccl("nccl_device/impl/cft__funcs.h"),
         r"if \(producer == ncclMemProxyType::Generic && consumer == ncclMemProxyType::Fabric\)")
    cite(nccl("nccl_device/impl/cft__funcs.h"),
         r'asm volatile\("fence\.proxy\.fabric::generic\.alias\.release\.sys;"')
    assert not [d for d in cg.check(GET_AFTER_COPY).diagnostics if d.is_error]
    text = _generated(GET_AFTER_COPY, "nccl-cft")
    assert "constexpr bool kPeersRead = true;" in text
    flag = text[text.index("void ccogen_flag("):]
    fence = flag.index("if (kPeersRead)")
    assert flag.index("ncclMemProxyType::Generic, ncclMemProxyType::Fabric,\n"
                      "                 ncclMemFenceScope::Sys)", fence) < flag.index("cft.red")
    no_get = GET_AFTER_COPY.replace('            get(1, dst=out, src=x, queue=0, signal="local")\n'
                                    '            wait_signal(0, queue=0)\n', "")
    no_get = no_get[:no_get.index("    ensure:")]
    assert "constexpr bool kPeersRead = false;" in _generated(no_get, "nccl-cft")


def test_cft_a_failed_fabric_operation_is_reported() -> None:
    """`fabric.try_*` ops complete through their mbarrier with a report; `flush` returns it
    (`hasReport`, `report`): dropping it would turn a failed put into a silent hang."""
    cite(nccl("nccl_device/cft.h"),
         r"void flush\(OpCoop coop, bool\* hasReport = nullptr, uint32_t\* report = nullptr\);")
    cite(nccl("nccl_device/impl/cft__funcs.h"), r'"fabric\.try_put\.async\.shared::cta\.mbarrier::'
                                                r'complete_tx::16B\.mbarrier::report::fabric')
    text = _generated(GET_AFTER_COPY, "nccl-cft")
    assert "cft.flush(coop);" not in text
    assert "cft.flush(coop, &failed, &report);\n" \
           "  if (failed && coop.thread_rank() == 0) ccogen_report(c, 0, peer, -1, 6, 0, report);" \
           in text
    from ccogen.rt.debug import KIND_FABRIC_REPORT, DebugRecord, describe_wait
    record = DebugRecord(1, 0, 0, 1, -1, KIND_FABRIC_REPORT, 0, 3, 2)
    assert describe_wait(record, "p.cco") == ("rank 0: a fabric operation toward rank 1 failed "
                                              "(CFT report 0x3) (epoch 2)")


# ============================================================================= NVSHMEM

COUNTED_THEN_SIGNAL = """
protocol counted_then_flag(size: bytes = 4 KiB):
    team lsa(2)
    between_launches: host_sync
    counter landed
    window src: size
    window stage: size
    window dst: size
    window note: 16
    window out: size

    kernel k(threads=256):
        if me == 0:
            copy(dst=stage, src=src)
            put(1, dst=dst, src=stage, queue=0, count=landed)
            put(1, dst=note, src=note, queue=0, signal="remote")
            quiet(1)
        else:
            wait_signal(0, queue=0)
            copy(dst=out, src=dst)
            wait_count(landed)

    ensure:
        if me == 1:
            out == init(src@0)
"""


def test_nvshmem_counted_data_comes_through_the_fabric_proxy() -> None:
    """On sm_100 the counted put is a fabric operation (`fabric_try_put_counted_async`), and
    NVSHMEM's own put-with-signal fences fabric and generic operations before its signal:
    a generic signal after a counted put orders nothing by itself.  The generated code
    releases fabric -> generic after every counted put and acquires after every wait on a
    signal slot, so a receiver that waits on the signal (not the counter) sees the data."""
    cite(nvshmem("non_abi/device/pt-to-pt/counted_device.cuh"),
         r"fabric_try_put_counted_async\(endpoint, data_off, count_off,")
    cite(nvshmem("non_abi/device/common/nvshmemi_common_device.cuh"),
         r"// Ensure that signal operation is ordered with respect\s*\n\s*"
         r"// to earlier fabric / generic operations", span=2)
    cite(nvshmem("device/logical_endpoint_device.cuh"),
         r'asm volatile\("fence\.proxy\.generic::fabric\.alias\.release\.sys;\\n"')
    assert not [d for d in cg.check(COUNTED_THEN_SIGNAL).diagnostics if d.is_error]
    text = _generated(COUNTED_THEN_SIGNAL, "nvshmem", "sm_100")
    put = text[text.index("void ccogen_putcounted_group("):]
    call = put.index("nvshmemx_putmem_signal_counted_nbi_block(")
    assert put.index('asm volatile("fence.proxy.async.global;"') < call < put.index(
        'asm volatile("fence.proxy.generic::fabric.alias.release.sys;"')
    receiver = text[text.index("_r1_b0(const ccogen_ctx& c)"):]
    receiver = receiver[:receiver.index("\n}\n")]
    wait = receiver.index("ccogen_wait_group(")
    acquire = receiver.index("ccogen_fabacquire_group(c);")
    assert wait < acquire < receiver.index("ccogen_copy_group(")
    assert "fabacquire" not in _generated(COUNTED_THEN_SIGNAL, "nvshmem")  # sm_90: emulated


def test_nvshmem_a_global_counted_source_is_loaded_by_tma_after_generic_stores() -> None:
    """A global-memory source is staged by TMA (`nvshmemi_tma_g2s_copy_thread`), the async
    proxy; NVSHMEM fences only shared memory (`fence.proxy.async.shared::cta`).  The
    `copy` into `stage` above is a generic store: `fence.proxy.async.global` first."""
    cite(nvshmem("non_abi/device/pt-to-pt/counted_device.cuh"),
         r"nvshmemi_tma_g2s_copy_thread\(0, staging\[slot\], staging_barrier, src \+ transferred")
    cite(nvshmem("non_abi/device/common/nvshmemi_common_device.cuh"),
         r'asm volatile\("fence\.proxy\.async\.shared::cta;\\n" ::: "memory"\);')
    text = _generated(COUNTED_THEN_SIGNAL, "nvshmem", "sm_100")
    assert text.count('asm volatile("fence.proxy.async.global;" ::: "memory");') == 1


@pytest.mark.toolchain
@pytest.mark.parametrize(("target", "arch", "text", "wanted"), [
    ("nvshmem", "sm_100", COUNTED_THEN_SIGNAL,
     ("fence.proxy.async.global", "fence.proxy.generic::fabric.alias.release.sys",
      "fence.proxy.generic::fabric.alias.acquire.sys", "counted::bytes")),
    ("nccl-cft", None, GET_AFTER_COPY, ("fence.proxy.fabric::generic.alias.release.sys",
                                        "fabric.try_get")),
], ids=["nvshmem-sm100", "nccl-cft"])
def test_the_fences_reach_the_ptx(target: str, arch: str | None, text: str,
                                  wanted: tuple[str, ...], tmp_path: Path) -> None:
    from ccogen.codegen.files import GeneratedFiles
    from ccogen.compiler import compile_protocol
    from ccogen.errors import ToolchainError
    from ccogen.syntax import parse_ir
    from ccogen.toolchains import build_dir

    files = compile_protocol(parse_ir(text, "p.cco"), target, source="p.cco", ranks=2,
                             arch=arch).files
    GeneratedFiles(files).write(tmp_path)
    try:
        build_dir(tmp_path)
    except ToolchainError as exc:
        pytest.skip(f"toolchain missing: {exc}")
    ptx = (tmp_path / "kernels.ptx").read_text()
    assert all(w in ptx for w in wanted), [w for w in wanted if w not in ptx]


def test_nvshmem_counted_writes_need_the_tma_policy_which_the_runtime_sets(tmp_path: Path) -> None:
    """Counted writes return NVSHMEMX_ERROR_NOT_SUPPORTED unless the TMA policy is ENABLE;
    the manifest asks for it and the runtime sets it before the engine starts (or refuses
    a process whose environment says otherwise: tests/runtime/test_requirements.py)."""
    cite(nvshmem("non_abi/device/pt-to-pt/counted_device.cuh"),
         r"nvshmemi_device_state_d\.tma_policy != NVSHMEMX_TMA_ENABLE \|\|")
    from ccogen.compiler import compile_protocol
    from ccogen.rt.requirements import read
    from ccogen.syntax import parse_ir

    files = compile_protocol(parse_ir(COUNTED_THEN_SIGNAL, "p.cco"), "nvshmem", source="p.cco",
                             ranks=2, arch="sm_100").files
    (tmp_path / "manifest.json").write_text(files["manifest.json"])
    assert dict(read(tmp_path, "nvshmem").env) == {"NVSHMEM_TMA_POLICY": "ENABLE"}


# ============================================================================= round 3 (#28)


def test_a_counted_wait_compares_a_never_reset_counter_so_its_total_must_be_known() -> None:
    """N2: `cft.waitCounted` and NVSHMEM's counted wait spin until the counter reaches a
    target and never reset it (`got - expected <= uint64_t(-1) >> 1`): a static wait on a
    counter that a run-time put also counts to would wait for the footprint (or advance
    by it per launch) and hang.  The checker refuses it (E035); the simulator runs the
    generated target and hangs in launch 2 (E030); the run-time sum compiles."""
    cite(nccl("nccl_device/impl/cft__funcs.h"),
         r"if \(got - expected <= uint64_t\(-1\) >> 1\) break;")
    cite(nvshmem("device/nvshmemx_defines.h"),
         r"while \(\(uint64_t\)\(nvshmemx_signal_counted_load\(signal_addr\) - expected\) >=")
    bad = LINT / "E035-static-wait-on-runtime-count.cco"
    ok = LINT / "E035-static-wait-on-runtime-count-ok.cco"
    for target in (None, "nccl-cft", "nvshmem", "nccl-lsa"):
        assert codes(bad, target=target) == {"E035"}, target
        assert codes(ok, target=target) == set(), target
    # omitted `expected=`: the byte-total targets would wait for the footprint; mori-sdma
    # waits for the puts' signal slots, and the language means every byte counted
    omitted = bad.read_text(encoding="utf-8").replace("wait_count(landed, expected=16)",
                                                      "wait_count(landed)")
    for target, wanted in ((None, False), ("mori-sdma", False), ("nccl-cft", True),
                           ("nvshmem", True), ("nccl-lsa", True)):
        found = {d.code for d in cg.check(omitted, target=target).diagnostics if d.is_error}
        assert ("E035" in found) is wanted, target
    from ccogen.sim import simulate
    assert simulate(omitted, seeds=2, path=bad.name).passed
    hung = simulate(bad.read_text(encoding="utf-8"), seeds=2, path=bad.name)
    assert {d.code for d in hung.diagnostics if d.is_error} == {"E030"}
    assert "reach 160 bytes" in str(hung.diagnostics[0].notes)
    from ccogen.compiler import compile_protocol
    from ccogen.errors import DiagnosticError
    from ccogen.syntax import parse_ir
    with pytest.raises(DiagnosticError) as refused:
        compile_protocol(parse_ir(bad.read_text(encoding="utf-8"), bad.name), "nccl-cft",
                         source=bad.name, ranks=2)
    assert {d.code for d in refused.value.diagnostics} == {"E035"}
    text = compile_protocol(parse_ir(ok.read_text(encoding="utf-8"), ok.name), "nccl-cft",
                            source=ok.name, ranks=2).files["kernels.cu"]
    assert "ccogen_rtwaitcounted_group(" in text


LOCAL_SIGNAL_AND_RESET = """
protocol fetch_reset(size: bytes = 4 KiB):
    team lsa(2)
    between_launches: host_sync
    counter landed
    window x: size
    window fresh: size
    window out: size
    window note: 16
    window credit: 16

    kernel k(threads=64):
        if me == 1:
            put(0, dst=x, src=fresh, queue=0, count=landed)
            wait_signal(0, queue=0)
        else:
            wait_count(landed)
            reset_count(landed)
            put(1, dst=credit, src=note, queue=0, signal="both")
            wait_signal(0, queue=0)
            copy(dst=out, src=x)

    ensure:
        if me == 0:
            out == init(fresh@1)
"""


def _fence_args(order: str, producer: str, consumer: str) -> str:
    return (f"ccogen_pfence_group(c, cuda::memory_order_{order}, ncclMemProxyType::{producer}, "
            f"ncclMemProxyType::{consumer}, ncclMemFenceScope::Sys);")


def test_cft_fences_come_from_one_table_of_producer_and_consumer_proxies() -> None:
    """N3, N4, N5: `ncclMemFence(order, producer, consumer, scope)` prints one instruction
    per (producer, consumer) pair; a counted wait's own acquire is fabric-only (its
    producer is always Fabric), NCCL's barrier passes the consumer through.  So: a `get`
    after a wait needs the Generic -> Fabric acquire (N3), a `reset_count` before a credit
    the Generic -> Fabric release (N4), a wait on my own slot (a local signal: a generic
    add) the Generic -> Generic acquire (N5); all from `codegen.fences.TABLES`."""
    funcs = nccl("nccl_device/impl/cft__funcs.h")
    cite(funcs, r"ncclMemFence\(coop, nccl::utility::acquireOrderOf\(order\), "
                r"ncclMemProxyType::Fabric, consumer, ncclMemFenceScope::Sys\);")
    cite(nccl("nccl_device/impl/cft_barrier__funcs.h"),
         r"ncclMemFence\(this->coop, nccl::utility::acquireOrderOf\(order\), producer, consumer,")
    cite(funcs, r"\} else \{ // Generic to Generic proxy sync")
    cite(funcs, r'asm volatile\("fence\.acquire\.sys;" ::: "memory"\);')
    from ccogen.codegen.fences import TABLES, Fence, Order, Proxy
    # nvshmem prints the instruction ncclMemFence prints for the same fence
    text = funcs.text()
    for fence, insn in TABLES["nvshmem"].items():
        assert f"asm volatile({insn} ::: \"memory\");" in text, (fence, insn)
    assert TABLES["nvshmem"][Fence(Order.ACQUIRE, Proxy.GENERIC, Proxy.FABRIC)] == \
        '"fence.proxy.fabric::generic.alias.acquire.sys;"'
    # N3: the getter's wait, then the acquire whose consumer is the fabric `get`
    got = _generated(GET_AFTER_COPY, "nccl-cft")
    getter = got[got.index("_r0_b0(const ccogen_ctx& c)"):]
    getter = getter[:getter.index("\n}\n")]
    wait = getter.index("ccogen_waitcounted_group(")
    acquire = getter.index(_fence_args("acquire", "Generic", "Fabric"))
    assert wait < acquire < getter.index("ccogen_copy_group(c, -1")
    # N5: the wait on my own slot (the get's local signal) acquires generic stores
    local = getter.index("ccogen_waitcounted_group(", wait + 1)
    assert getter.index(_fence_args("acquire", "Generic", "Generic"), local) > local
    # N4: the reset, then the release that keeps the peer's next counted add behind it
    assert not [d for d in cg.check(LOCAL_SIGNAL_AND_RESET).diagnostics if d.is_error]
    reset = _generated(LOCAL_SIGNAL_AND_RESET, "nccl-cft")
    body = reset[reset.index("_r0_b0(const ccogen_ctx& c)"):]
    at = body.index("ccogen_reset_group(")
    release = body.index(_fence_args("release", "Generic", "Fabric"), at)
    assert release < body.index("ccogen_copy_group(", at)  # the credit's put, then its signal
    local = body.index("ccogen_waitcounted_group(", at)
    assert body.index(_fence_args("acquire", "Generic", "Generic"), local) > local


COUNTED_FROM_A_BUFFER = """
protocol counted_buffer(size: bytes = 4 KiB):
    team lsa(2)
    between_launches: host_sync
    counter landed
    buffer src: u8[size]
    window dst: size

    kernel k(threads=256):
        if me == 0:
            put(1, dst=dst, src=src, queue=0, count=landed)
            quiet(1)
        else:
            wait_count(landed)
"""


def test_nvshmem_a_counter_fed_by_generic_adds_is_acquired_for_generic_stores() -> None:
    """N5 on NVSHMEM sm_100: `nvshmemx_signal_counted_wait_until` spins on volatile loads
    and acquires fabric -> generic only; a counted put from a local buffer stays the
    emulation (a generic atomic add on the counter), so the wait adds the generic
    acquire from the same table."""
    header = nvshmem("device/nvshmemx_defines.h")
    cite(header, r"return \*reinterpret_cast<const volatile uint64_t \*>\(signal_addr\);")
    cite(header, r"fence_proxy_fabric2generic_acquire_system\(\);")
    text = _generated(COUNTED_FROM_A_BUFFER, "nvshmem", "sm_100")
    body = text[text.index("_r1_b0(const ccogen_ctx& c)"):]
    wait = body.index("ccogen_waitcounted_group(")
    assert body.index('ccogen_pfence_group(c, "fence.acquire.sys;");', wait) > wait
    assert 'ccogen_pfence_group(c, "fence.acquire.sys;")' not in _generated(
        COUNTED_THEN_SIGNAL, "nvshmem", "sm_100")


def test_cft_puts_keep_under_16_mb_in_flight_per_cft_smem() -> None:
    """N8: an `ncclCftSmem` mbarrier expects the submitted bytes in 16-byte units
    (`txCount += bytes / 16`, `mbarrier.expect_tx`); a tx count holds at most 2^20 - 1, so
    one smem tracks at most 16 MB of put/red in flight (NCCL's documented limit).  The
    staged put flushes before a chunk would take it past that, whatever its size."""
    funcs = nccl("nccl_device/impl/cft__funcs.h")
    cite(funcs, r"mbarrier\.expect_tx\.relaxed\.cta\.shared::cta\.b64 \[%0\], %1;")
    cite(funcs, r"this->txCount \+= \(bytes / 16\);")
    from ccogen.codegen.backends.nccl_cft import MAX_IN_FLIGHT, STAGE_BYTES
    assert MAX_IN_FLIGHT // 16 <= (1 << 20) - 1 and MAX_IN_FLIGHT <= 16 << 20
    big = GET_AFTER_COPY.replace("size: bytes = 4 KiB", "size: bytes = 64 MiB")
    text = _generated(big, "nccl-cft")
    assert f"constexpr uint64_t kMaxInFlight = {MAX_IN_FLIGHT}ULL;" in text
    write = text[text.index("void ccogen_cft_write("):]
    write = write[:write.index("\n}\n")]
    loop = write.index("for (uint64_t done = 0; done < n; done += stage_bytes)")
    check = write.index("if (pending + len > kMaxInFlight) {", loop)
    assert loop < check < write.index("ccogen_cft_flush(c, cft, coop, peer);", check) < \
        write.index("cft.submit(coop);")
    assert STAGE_BYTES <= MAX_IN_FLIGHT


# ============================================================================= MORI (#28)


def test_mori_a_batch_larger_than_the_sdma_ring_never_commits() -> None:
    """N1: the ring is `CCO_SDMA_QUEUE_SIZE` = 256 KiB in 32-byte units, a put with both
    signals takes 3 (`ccoSdmaGroupBytes`: `CCO_SDMA_UNIT * (n + sig)`), and `ReserveSlot`
    spins while the reservation runs more than the ring past the engine's read pointer:
    the 2731st uncommitted put with both signals spins forever (E029)."""
    from ccogen.targets.mori_sdma import SDMA_QUEUE_BYTES, SDMA_RING_UNITS, SDMA_UNIT_BYTES
    size = cite(mori(), r"constexpr uint32_t CCO_SDMA_QUEUE_SIZE = 256 \* 1024;")
    unit = cite(mori(), r"constexpr uint64_t CCO_SDMA_UNIT = 32;")
    cite(mori(), r": CCO_SDMA_UNIT \* \(n \+ sig\);")
    cite(mori(), r"return \(localSignal \? 1 : 0\) \+ \(remoteSignal \? 1 : 0\);")
    cite(mori(), r"\} while \(\(base \+ slotBytes\) - cachedHwReadIndex > CCO_SDMA_QUEUE_SIZE\);")
    assert str(SDMA_QUEUE_BYTES // 1024) in size.text and str(SDMA_UNIT_BYTES) in unit.text
    assert SDMA_RING_UNITS // 3 + 1 == 2731
    bad = LINT / "E029-sdma-ring-overflow.cco"
    assert codes(bad, target="mori-sdma") == {"E029"}
    assert codes(LINT / "E029-sdma-ring-overflow-ok.cco", target="mori-sdma") == set()
    fits = bad.read_text(encoding="utf-8").replace("n: int = 2731", "n: int = 2730")
    assert not [d for d in cg.check(fits, target="mori-sdma").diagnostics if d.is_error]
    assert codes(bad, target="nccl-lsa") == set()  # a limit of the SDMA ring only


def test_mori_1_2_4_waits_on_each_queue_in_order_so_waves_must_not_interleave() -> None:
    """(a), (b): `submitPacket` spins until `committedWptr` equals the op's own base, and
    a commit moves it past every reservation: two waves committing one (peer, queue) at
    once (the second waits forever: E028), and thread-independent lanes of one wave that
    reserve on several queues while another wave reserves on them (each waits for the
    other's commit: E015).  amd-mori 1.2.4 is the version ccogen builds against."""
    from ccogen.toolchains.locate import MORI_VERSION
    assert MORI_VERSION == "1.2.4"
    cite(mori(), r"while \(__hip_atomic_load\(impl::global\(committedWptr\), __ATOMIC_RELAXED,"
                 r"\s*\n\s*__HIP_MEMORY_SCOPE_AGENT\) != base\)", span=2)
    cite(mori(), r"ccoSdmaThreadIndependent = 0,")
    assert codes(LINT / "E015-independent-lanes-shared-queue.cco", target="mori-sdma") == {"E015"}
    assert codes(LINT / "E015-independent-lanes-shared-queue-ok.cco", target="mori-sdma") == set()
    assert codes(LINT / "E015-independent-lanes-shared-queue.cco", target="nccl-lsa") == set()
    two_commits = """
protocol twocommits(piece: bytes = 4 KiB):
    team lsa(2)
    window x: 16 * piece
    window a: 16 * piece

    kernel k(threads=128):
        if me == 0:
            warps w in range(2):
                for i in range(8):
                    put(1, dst=a[(w * 8 + i)*piece : (w * 8 + i + 1)*piece],
                        src=x[(w * 8 + i)*piece : (w * 8 + i + 1)*piece], queue=0, aggregate=True)
                commit(1, queue=0)
            quiet(1)
"""
    found = {d.code for d in cg.check(two_commits, target="mori-sdma").diagnostics if d.is_error}
    assert found == {"E028"}
    own = two_commits.replace("queue=0, aggregate=True", "queue=w, aggregate=True").replace(
        "commit(1, queue=0)", "commit(1, queue=w)").replace("team lsa(2)",
                                                            "team lsa(2)\n    queues 2")
    assert not [d for d in cg.check(own, target="mori-sdma").diagnostics if d.is_error]


MID_POST_QUIET = """
protocol shared(piece: bytes = 4 KiB):
    team lsa(2)
    window x: 4 * piece
    window a: 4 * piece

    kernel k(threads=128):
        if me == 0:
            warps w in range(2):
                put(1, dst=a[w * piece : (w + 1) * piece], src=x[w * piece : (w + 1) * piece],
                    queue=0)
                quiet(1, queue=0)
            lanes l in range(2):
                put(1, dst=a[(2 + l) * piece : (3 + l) * piece],
                    src=x[(2 + l) * piece : (3 + l) * piece], queue=0)
                quiet(1)
"""


def _mori(text: str, debug: bool) -> str:
    from ccogen.compiler import compile_protocol
    from ccogen.syntax import parse_ir

    return compile_protocol(parse_ir(text, "p.cco"), "mori-sdma", source="p.cco", ranks=2,
                            debug=debug).files["kernels.hip"]


def test_mori_debug_quiet_does_not_trap_on_another_waves_reservation() -> None:
    """N6: with MORI_CCO_SDMA_DEBUG, `ccoSdmaDrainQueue` traps whenever the reservation
    pointer (`cachedWptr`, raised by `ReserveSlot` before a packet is committed) is past
    the committed one, which is also the case while another wave is mid-post on the
    queue: no misuse (an uncommitted batch before a quiet is E020).  The debug build
    drains to the committed pointer with ccogen's bounded wait instead (debug kind 8);
    the release build keeps amd-mori's quiet."""
    cite(mori(), r"__builtin_trap\(\);  // un-committed Aggregate puts: call commit\(\) first")
    cite(mori(), r"uint64_t base = __hip_atomic_fetch_add\(impl::global\(cachedWptr\), slotBytes,")
    assert not [d for d in cg.check(MID_POST_QUIET, target="mori-sdma").diagnostics
                if d.is_error]
    debug, release = _mori(MID_POST_QUIET, True), _mori(MID_POST_QUIET, False)
    assert "#define MORI_CCO_SDMA_DEBUG 1" in debug
    assert "sdma.quiet" not in debug and "ccoSdmaDrainQueue" not in debug
    assert "ccogen_quiet_bounded<ccoCoopWarp>(c, 1, 0, " in debug
    assert "ccogen_quiet_bounded<ccoCoopThread>(c, a.peer, a.queue, " in debug
    assert "sdma.quietQueue<ccoCoopWarp>(1, 0);" in release
    assert "ccogen_quiet_bounded" not in release
    from ccogen.rt.debug import KIND_QUIET, DebugRecord, describe_wait
    assert KIND_QUIET == 8 and "r->kind = 8;" in debug
    record = DebugRecord(1, 0, 12, 1, 0, KIND_QUIET, 4096, 1024, 3)
    assert describe_wait(record, "p.cco") == ("rank 0: quiet at p.cco:12 toward rank 1, queue 0: "
                                              "the engine read up to 1024 of 4096 committed "
                                              "bytes (epoch 3)")


@pytest.mark.toolchain
def test_mori_debug_quiet_builds(tmp_path: Path) -> None:
    from ccogen.codegen.files import GeneratedFiles
    from ccogen.compiler import compile_protocol
    from ccogen.errors import ToolchainError
    from ccogen.syntax import parse_ir
    from ccogen.toolchains import build_dir

    files = compile_protocol(parse_ir(MID_POST_QUIET, "p.cco"), "mori-sdma", source="p.cco",
                             ranks=2, debug=True).files
    GeneratedFiles(files).write(tmp_path)
    try:
        build_dir(tmp_path)
    except ToolchainError as exc:
        pytest.skip(f"toolchain missing: {exc}")
    assert (tmp_path / "kernels.gfx942.hsaco").is_file()


def test_cft_one_barrier_session_per_rank_between_the_rank_wide_syncs() -> None:
    """P1: a CFT barrier session is indexed (`ncclCftBarrierSession(coop, comm, index)`,
    `index < reqs.cftBarrierCount`); the generated `barrier()` already meets every CTA of
    the rank before and after it, so CTA 0 alone syncs slot 0 and the manifest asks for
    one slot, not one per CTA."""
    import json

    cite(nccl("nccl_device/cft_barrier.h"),
         r"ncclCftBarrierSession\(Coop coop, ncclDevComm const& comm, uint32_t index,")
    from ccogen.compiler import compile_protocol
    from ccogen.syntax import parse_ir

    big = GET_AFTER_COPY.replace("size: bytes = 4 KiB", "size: bytes = 8 MiB")
    files = compile_protocol(parse_ir(big, "p.cco"), "nccl-cft", source="p.cco", ranks=2).files
    text = files["kernels.cu"]
    barrier = text[text.index("void ccogen_barrier_group("):]
    barrier = barrier[:barrier.index("\n}\n")]
    assert barrier.index("ccogen_rank_sync(c, 2 * seq - 1);") < barrier.index(
        "if (blockIdx.x == 0) {") < barrier.index(
        "ncclCftBarrierSession<ncclCoopCta> bar{ncclCoopCta(), *c.dc, 0};") < barrier.index(
        "ccogen_rank_sync(c, 2 * seq);")
    manifest = json.loads(files["manifest.json"])
    assert max(k["grid"] for k in manifest["kernels"]) > 1  # several CTAs, one session
    assert manifest["nccl"]["cft_barrier_count"] == 1
