"""Language v2 on a GPU (`gpu` marker): `reduce`, `signal`, typed data and local buffers.

Runs through `ccogen.run` on nvshmem, the ranks sharing the GPUs under CUDA MPS when
there are fewer GPUs than ranks; skipped without a GPU, without MPS where it is needed, or
without the nvshmem toolchain.  Every epoch fills windows and buffers with typed seeded
data and checks every `ensure` (dtype-aware: floats within the simulator's tolerance).
The element types and sizes are chosen for the lowering's paths: odd element counts
(a tail under 16 bytes), chunks whose starts are not 16-byte aligned (the element path),
integer sums (wrapping), negative weights.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ccogen.rt import native, run
from ccogen.rt.placement import detect_mps

from .conftest import require_toolchain

ROOT = Path(__file__).resolve().parents[2]
LOCAL_REDUCE = ROOT / "tests" / "runtime" / "data" / "local_reduce.cco"
V2 = ("allreduce_oneshot", "allreduce_twoshot", "reduce_scatter_ring", "broadcast_pipelined")


@pytest.fixture(autouse=True)
def _gpu() -> None:
    try:
        gpus = native.device_count()
    except native.GpuUnavailable as exc:
        pytest.skip(f"no NVIDIA GPU: {exc}")
    if gpus < 1:
        pytest.skip("no NVIDIA GPU")
    if gpus < 2:
        status = detect_mps()
        if not status.running:
            pytest.skip(f"one GPU and no CUDA MPS (nvidia-cuda-mps-control -d): {status.detail}")
    require_toolchain("nvshmem")


TYPED = [
    ("allreduce_oneshot", {"n": 1001, "T": "f16"}),     # a 2-byte tail after 16-byte words
    ("allreduce_oneshot", {"n": 4099, "T": "i32"}),     # wrapping integer sums
    ("allreduce_twoshot", {"chunk": 1001, "T": "f32"}),  # chunk starts not 16-byte aligned
    # f32: in bf16 the ring's partial sums are rounded at every hop, beyond the tolerance
    # of one rounded sum at 3 ranks (the simulator reports that instance E033 as well)
    ("reduce_scatter_ring", {"chunk": 777, "T": "f32"}),  # 3108-byte chunks: element path
]
DTYPES = ("bf16", "f16", "f32", "i32", "u8")


@pytest.fixture(scope="module", autouse=True)
def _prebuilt() -> None:
    """Build every cubin up front, in parallel (the runs then hit the build cache)."""
    from concurrent.futures import ThreadPoolExecutor

    from ccogen.rt.api import compile_for_run
    from ccogen.syntax import load_ir
    from ccogen.toolchains.cubin import build_manifest_dir

    try:
        if native.device_count() < 1:
            return
    except native.GpuUnavailable:
        return
    cases = [(ROOT / "protocols" / f"{s}.cco", n, {}) for s in V2 for n in (2, 4)]
    cases += [(ROOT / "protocols" / f"{s}.cco", 3, p) for s, p in TYPED]
    cases += [(LOCAL_REDUCE, 2, {"T": d}) for d in DTYPES]

    def build(job: tuple[Path, int, dict[str, object]]) -> None:
        path, ranks, params = job
        tag = "-".join(f"{k}{v}" for k, v in params.items())
        out = ROOT / "build" / "gpu-v2" / f"{path.stem}-n{ranks}-{tag}"
        compile_for_run(load_ir(path), path.name, "nvshmem", ranks, params, out,  # type: ignore[arg-type]
                        debug=False)
        build_manifest_dir(out)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(build, cases))


def _holds(path: Path, ranks: int, params: dict[str, object], iters: int = 100) -> None:
    report = run(path, target="nvshmem", ranks=ranks, params=params,  # type: ignore[arg-type]
                 iters=iters, seed=11, watchdog_s=20)
    print(report.format())
    assert report.ok, report.format()
    assert all(r.epochs == iters for r in report.ranks)
    assert all(r.checks_per_epoch > 0 for r in report.ranks)


@pytest.mark.gpu
@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("stem", V2)
def test_v2_library_protocol_holds(stem: str, ranks: int) -> None:
    _holds(ROOT / "protocols" / f"{stem}.cco", ranks, {})


@pytest.mark.gpu
@pytest.mark.parametrize(("stem", "params"), TYPED, ids=["oneshot-f16-tail", "oneshot-i32",
                                                         "twoshot-f32-unaligned", "ring-f32-odd"])
def test_typed_and_odd_sizes_hold(stem: str, params: dict[str, object]) -> None:
    _holds(ROOT / "protocols" / f"{stem}.cco", 3, params, iters=20)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_weighted_local_reduce_holds(dtype: str) -> None:
    _holds(LOCAL_REDUCE, 2, {"T": dtype}, iters=20)
