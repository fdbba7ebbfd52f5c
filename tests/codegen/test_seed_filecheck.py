# ruff: noqa: E501  (CHECK lines mirror generated lines)
"""FileCheck tests: each seed feature is emitted where expected (and not where it is not).

Goldens say "the whole file is right"; these say "this feature emits that", so that a
template reshuffle does not churn every assertion.  Checked with the PyPI `filecheck`.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.codegen.seed import CFT, MORI, NVSHMEM_SM100, Variant, compiled

# (protocol, variant, ranks, generated file, FileCheck directives)
CASES: list[tuple[str, Variant, int, str, str]] = [
    # SameQueue when proven: the 8 lanes of one warp target one (peer, queue): ONE call
    # site, reached by the 8 lanes together, SameQueue, one signal (remoteSignal=true)
    # after rank 1's credit (a 16-byte signalled put on queue 1, no barrier: issue 30)
    ("lane_ship", MORI, 2, "kernels.hip", """
CHECK:       #define BUILD_CCO_SDMA 1
CHECK:       #include "mori/cco/cco.hpp"
CHECK-LABEL: void ccogen_lane_ship_ship_r0_b0(
CHECK-NOT:   barrier
CHECK:       sdma.waitSignal(1, 1, 1ULL + c.epoch * 1ULL);
CHECK:       if (ccogen_wave() == 0) {
CHECK:       lane_ship.cco:23: put (8 lanes)
CHECK:       switch (threadIdx.x) {
CHECK-COUNT-8: a.on = true; a.peer = 1; a.queue = 0;
CHECK:       sdma.put<ccoCoopThread, false, true, ccoSdmaOptFlagsDefault, ccoSdmaThreadSameQueue>(a.peer, c.win, a.dst, c.win, a.src, a.bytes, a.queue);
CHECK-NOT:   sdma.put<
CHECK:       sdma.quiet<ccoCoopBlock>(1);
CHECK-LABEL: void ccogen_lane_ship_ship_r1_b0(
CHECK-NOT:   barrier
CHECK:       sdma.put<ccoCoopBlock, false, true, ccoSdmaOptFlagsDefault, ccoSdmaThreadIndependent>(0, c.win, {{[0-9]+}}ULL, c.win, {{[0-9]+}}ULL, 16ULL, 1);
CHECK:       sdma.waitSignal(0, 0, 1ULL + c.epoch * 1ULL);
CHECK-NEXT:  ccogen_acquire_system();
"""),
    # back to back by credits: a 16-byte signalled put to every peer on queue 1 (a bare
    # `signal` has no SDMA lowering), each peer's credit awaited, no barrier; then the
    # lanes, not provable: one lane per peer at 4 ranks -> Independent
    ("alltoall", MORI, 4, "kernels.hip", """
CHECK-LABEL: void ccogen_alltoall_exchange_r0_b0(
CHECK-NOT:   barrier
CHECK-COUNT-3: sdma.put<ccoCoopBlock, false, true, ccoSdmaOptFlagsDefault, ccoSdmaThreadIndependent>({{[1-3]}}, c.win, {{[0-9]+}}ULL, c.win, {{[0-9]+}}ULL, 16ULL, 1);
CHECK:       sdma.waitSignal(1, 1, 1ULL + c.epoch * 1ULL);
CHECK:       sdma.waitSignal(2, 1, 1ULL + c.epoch * 1ULL);
CHECK:       sdma.waitSignal(3, 1, 1ULL + c.epoch * 1ULL);
CHECK-NOT:   barrier
CHECK:       case 0: a.on = true; a.peer = 1;
CHECK:       case 1: a.on = true; a.peer = 2;
CHECK:       case 2: a.on = true; a.peer = 3;
CHECK:       sdma.put<ccoCoopThread, false, true, ccoSdmaOptFlagsDefault, ccoSdmaThreadIndependent>(
CHECK:       sdma.quiet<ccoCoopThread>(a.peer);
CHECK:       sdma.waitSignal(a.sender, a.queue, a.value + c.epoch * a.per_epoch);
CHECK-NOT:   ccoSdmaThreadSameQueue
"""),
    # Aggregate: eight puts without a doorbell, then exactly one commit for the batch,
    # then the drain of that queue with the issuer's Coop
    ("aggregated_batch", MORI, 2, "kernels.hip", """
CHECK-LABEL: void ccogen_aggregated_batch_batch_r0_b0(
CHECK-COUNT-7: sdma.put<ccoCoopBlock, false, false, ccoSdmaOptFlagsAggregate, ccoSdmaThreadIndependent>(1,
CHECK:       sdma.put<ccoCoopBlock, false, true, ccoSdmaOptFlagsAggregate, ccoSdmaThreadIndependent>(1,
CHECK-NOT:   sdma.put<
CHECK:       if (threadIdx.x == 0) sdma.commit<ccoCoopThread>(1, 0);
CHECK-NOT:   sdma.commit
CHECK:       sdma.quietQueue<ccoCoopBlock>(1, 0);
CHECK-NOT:   sdma.commit
CHECK-LABEL: void ccogen_aggregated_batch_batch_r1_b0(
CHECK:       sdma.waitSignal(0, 0, 1ULL + c.epoch * 1ULL);
"""),
    # signals ride the data's queue: warp w signals with its puts on queue w, the
    # receiver waits per (src, queue) with running totals and the epoch offset
    ("two_queue_pipeline", MORI, 2, "kernels.hip", """
CHECK-LABEL: void ccogen_two_queue_pipeline_stream_r0_b0(
CHECK:       if (ccogen_wave() == 0) {
CHECK-COUNT-4: sdma.put<ccoCoopWarp, false, true, ccoSdmaOptFlagsDefault, ccoSdmaThreadIndependent>(1, c.win, {{[0-9]+}}ULL, c.win, {{[0-9]+}}ULL, 1048576ULL, 0);
CHECK:       sdma.quietQueue<ccoCoopWarp>(1, 0);
CHECK:       if (ccogen_wave() == 1) {
CHECK-COUNT-4: sdma.put<ccoCoopWarp, false, true, ccoSdmaOptFlagsDefault, ccoSdmaThreadIndependent>(1, c.win, {{[0-9]+}}ULL, c.win, {{[0-9]+}}ULL, 1048576ULL, 1);
CHECK:       sdma.quietQueue<ccoCoopWarp>(1, 1);
CHECK-LABEL: void ccogen_two_queue_pipeline_stream_r1_b0(
CHECK:       sdma.waitSignal(0, 0, 1ULL + c.epoch * 4ULL);
CHECK:       sdma.waitSignal(0, 1, 1ULL + c.epoch * 4ULL);
CHECK:       sdma.waitSignal(0, 1, 4ULL + c.epoch * 4ULL);
"""),
    # the host entry: queue count from the assignment, a clear error without SDMA
    ("striped_put", MORI, 2, "host.cpp", """
CHECK:       constexpr int kSdmaQueues = 4;
CHECK:       int ccogen_striped_put_setup(
CHECK:       ccoCommCreate(uid, nranks, rank, per_rank_vmm, &s->comm);
CHECK:       ccoMemAlloc(s->comm, kHeapBytes, &s->heap);
CHECK:       ccoWindowRegister(s->comm, s->heap, kHeapBytes, &s->win);
CHECK:       reqs.gdaConnectionType = CCO_GDA_CONNECTION_NONE;
CHECK:       reqs.sdmaQueueCount = kSdmaQueues;
CHECK:       ccoDevCommCreate(s->comm, &reqs, &s->dev);
CHECK:       if (s->dev.sdma.sdmaNumQueue == 0)
CHECK-NEXT:  SDMA is unavailable
CHECK-NEXT:  set MORI_ENABLE_SDMA=1
"""),
    # CFT: counted puts with 256-byte-aligned counters, received with cft.waitCounted
    ("counted_gather", CFT, 2, "kernels.cu", """
CHECK:       constexpr bool kCountedHeap = true;
CHECK:       __shared__ alignas(16) unsigned char ccogen_stage[kStageBytes];
CHECK:       ncclGetCftLeInfo(c.win, 0, peer, c.team, *c.dc, le, base);
CHECK:       cft.flush(coop, &failed, &report);
CHECK-NEXT:  if (failed && coop.thread_rank() == 0) ccogen_report(c, 0, peer, -1, 6, 0, report);
CHECK:       ccogen_copy_range(reinterpret_cast<char*>(stage), src + done, len, true,
CHECK:       ncclMemFence(coop, cuda::memory_order_release, ncclMemProxyType::Generic, ncclMemProxyType::Fabric,
CHECK:       cft.putCounted(coop, le, base + doff + done, base + counter, stage, len);
CHECK:       cft.submit(coop);
CHECK-NEXT:  cft.flushSmem(coop);
CHECK:       ccogen_cft_flush(c, cft, coop, peer);
CHECK:       cft.waitCounted(ncclCoopCta(), cuda::memory_order_acquire, ncclMemProxyType::Generic, word, target,
CHECK-LABEL: void ccogen_counted_gather_gather_r0_b0(
CHECK:       ccogen_waitcounted_group(c, [[CTR:[0-9]+]]ULL, 1048576ULL, 1048576ULL,
CHECK-LABEL: void ccogen_counted_gather_gather_r1_b0(
CHECK:       ccogen_putcounted_group(c, 0, {{[0-9]+}}ULL, 0ULL, 1048576ULL, [[CTR]]ULL);
"""),
    # CFT: remote signals are fenced flag updates (red) on the slot of the data's queue;
    # the CFT barrier count is requested on the host side; rank 1's four rounds of
    # counted waits are one loop (a rank alone rolls its runs: codegen.ranks.fold_ranks)
    ("two_queue_pipeline", CFT, 2, "kernels.cu", """
CHECK:       constexpr bool kCountedHeap = false;
CHECK:       ncclMemFence(coop, cuda::memory_order_release, ncclMemProxyType::Fabric, ncclMemProxyType::Generic,
CHECK-NEXT:  ncclMemFenceScope::Sys);
CHECK:       cft.red(coop, le, base + off, ncclCftOpSum<uint64_t>(), ccogen_cft_flag[slot], 16);
CHECK-LABEL: void ccogen_two_queue_pipeline_stream_r0_b0(
CHECK:       if (ccogen_is_warp(c, 0)) {
CHECK:       ccogen_copy_warp(c, 1,
CHECK-NEXT:  ccogen_sync_warp(
CHECK-NEXT:  ccogen_signal_warp(c, 1, [[Q0:[0-9]+]]ULL, 1ULL);
CHECK:       if (ccogen_is_warp(c, 1)) {
CHECK:       ccogen_copy_warp(c, 1,
CHECK-NEXT:  ccogen_sync_warp(
CHECK-NEXT:  ccogen_signal_warp(c, 1, [[Q1:[0-9]+]]ULL, 1ULL);
CHECK-LABEL: void ccogen_two_queue_pipeline_stream_r1_b0(
CHECK:       for (int64_t t = 0; t < 4; ++t) {
CHECK:       ccogen_waitcounted_group(c, [[Q0]]ULL, static_cast<uint64_t>(1LL + 1LL * t), 4ULL,
CHECK:       ccogen_waitcounted_group(c, [[Q1]]ULL, static_cast<uint64_t>(1LL + 1LL * t), 4ULL,
"""),
    ("counted_gather", CFT, 2, "manifest.json", """
CHECK:       "cft_caps": [
CHECK-NEXT:  "NCCL_CFT"
CHECK:       "window_flags": [
CHECK-NEXT:  "NCCL_WIN_COLL_SYMMETRIC",
CHECK-NEXT:  "NCCL_WIN_CFT_COUNTED"
"""),
    # NVSHMEM counted writes on sm_100: the counted API, smem donation per CTA
    ("counted_gather", NVSHMEM_SM100, 2, "kernels.cu", """
CHECK:       #if defined(NVSHMEM_CFT_HANDLES_SUPPORT)
CHECK:       nvshmemx_putmem_signal_counted_nbi_block(c.heap + doff + lo, c.heap + soff + lo,
CHECK:       nvshmemx_putmem_signal_nbi_block(c.heap + doff + lo, c.heap + soff + lo, hi - lo, ccogen_word(c, counter),
CHECK-NEXT:  hi - lo, NVSHMEM_SIGNAL_ADD, dp);
CHECK:       nvshmemx_signal_counted_wait_until(ccogen_word(c, off), v + c.epoch * pe);
CHECK:       nvshmemx_give_smem(ccogen_dsmem, kCcogenDonatedSmem);
CHECK:       nvshmemx_release_smem();
CHECK-LABEL: void ccogen_counted_gather_gather_r0_b0(
CHECK:       ccogen_waitcounted_group(c, [[CTR:[0-9]+]]ULL, 1048576ULL, 1048576ULL,
CHECK-LABEL: void ccogen_counted_gather_gather_r1_b0(
CHECK:       ccogen_putcounted_group(c, 0, {{[0-9]+}}ULL, 0ULL, 1048576ULL, [[CTR]]ULL);
CHECK:       ccogen_give_smem();
CHECK:       switch
CHECK:       ccogen_release_smem();
"""),
]


def filecheck(text: str, directives: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    source, checks = tmp / "input.txt", tmp / "checks.txt"
    source.write_text(text, encoding="utf-8")
    checks.write_text(directives, encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "filecheck", "--input-file", str(source),
                           str(checks)], capture_output=True, text=True, check=False)


@pytest.mark.parametrize(("stem", "variant", "ranks", "name", "directives"), CASES,
                         ids=[f"{c[1]}-{c[0]}-n{c[2]}-{c[3]}" for c in CASES])
def test_feature_is_emitted(stem: str, variant: Variant, ranks: int, name: str,
                            directives: str, tmp_path: Path) -> None:
    text = compiled(stem, variant, ranks).files[name]
    done = filecheck(text, directives, tmp_path)
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr[-3000:]


def test_filecheck_catches_a_missing_feature(tmp_path: Path) -> None:
    text = compiled("lane_ship", MORI, 2).files["kernels.hip"]
    done = filecheck(text, "CHECK: ccoSdmaThreadIndependent>(a.peer\n", tmp_path)
    assert done.returncode != 0 or done.stderr.strip()


@pytest.mark.usefixtures("per_rank")  # every rank's counters as literals
@pytest.mark.parametrize("variant", [CFT, NVSHMEM_SM100], ids=str)
@pytest.mark.parametrize("stem", ["counted_gather", "counted_broadcast"])
def test_counted_puts_use_256_byte_aligned_counters(stem: str, variant: Variant) -> None:
    text = compiled(stem, variant, 4).files["kernels.cu"]
    counters = [int(m) for m in re.findall(r"ccogen_putcounted_group\(c, \d+, \d+ULL, \d+ULL, "
                                           r"\d+ULL, (\d+)ULL\)", text)]
    assert counters and all(c % 256 == 0 for c in counters)
