"""The protocol library on real GPUs: generated code, both CUDA targets, 100 epochs.

Every protocol of `protocols/` that runs on 2 ranks is generated, built and launched
on 2 GPUs for each of `nccl-lsa` and `nvshmem`; every `ensure` must hold on random data
in every epoch (run-time protocols: on contents drawn afresh each epoch to satisfy
`require`, at the tests' small MoE shape).  A protocol the checker rejects for
hanging, run with `--debug`, must end within the timeout with the wait named.
Auto-skipped without GPUs.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ccogen.instantiate import team_sizes
from ccogen.rt import native, run
from ccogen.syntax import load_ir
from tests.helpers import library_params

ROOT = Path(__file__).resolve().parents[2]
TARGETS = ("nccl-lsa", "nvshmem")
ITERS = 100


def _fits_two(path: Path) -> bool:
    return 2 in team_sizes(load_ir(path), None) or load_ir(path).team.size is None


PROTOCOLS = [p for p in sorted((ROOT / "protocols").glob("*.cco")) if _fits_two(p)]


@pytest.fixture(autouse=True)
def _two_gpus() -> None:
    if native.device_count() < 2:
        pytest.skip("needs 2 GPUs")


@pytest.fixture(scope="module", autouse=True)
def _prebuilt() -> None:
    """Build every cubin up front, in parallel (the runs then hit the build cache)."""
    from ccogen.rt.api import compile_for_run
    from ccogen.toolchains.cubin import build_manifest_dir

    def build(job: tuple[Path, str]) -> None:
        path, target = job
        out = ROOT / "build" / "gpu-protocols" / f"{path.stem}-{target}"
        compile_for_run(load_ir(path), path.name, target, 2, library_params(path), out,
                        debug=False)
        build_manifest_dir(out)

    if native.device_count() >= 2:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(build, [(p, t) for p in PROTOCOLS for t in TARGETS]))


@pytest.mark.gpu
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("path", PROTOCOLS, ids=[p.stem for p in PROTOCOLS])
def test_protocol_holds_on_gpus(path: Path, target: str) -> None:
    report = run(path, target=target, ranks=2, params=library_params(path), iters=ITERS,
                 seed=7)
    print(report.format())
    assert report.ok, report.format()
    assert all(r.epochs == ITERS for r in report.ranks)


@pytest.mark.gpu
@pytest.mark.parametrize("target", TARGETS)
def test_debug_build_names_the_hanging_wait(target: str) -> None:
    report = run(ROOT / "tests" / "runtime" / "data" / "hang_generated.cco", target=target,
                 ranks=2, iters=1, debug=True, force=True, watchdog_s=60)
    print(report.format())
    waits = [r.wait for r in report.ranks if r.wait]
    assert waits, report.format()
    assert "hang_generated.cco:12" in waits[0] and "src 0, queue 0" in waits[0]
    assert "expected 2" in waits[0] and "observed 1" in waits[0]
