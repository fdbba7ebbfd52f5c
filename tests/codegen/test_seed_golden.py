"""Generated code of every library protocol x seed target, against blessed golden files.

Targets: `mori-sdma` (kernels.hip, host.cpp, manifest), `nccl-cft` (kernels.cu, manifest)
and `nvshmem` at sm_100 (the counted-write path; kernels.cu, manifest), each at 2 ranks
with default parameters, in `tests/golden/<variant>/`.  A protocol the target cannot
express is refused with the rule in `seed.REFUSED` (no golden).  Regenerate with
`python -m pytest tests/codegen --update-golden` and review the diff.
"""

from __future__ import annotations

import pytest

from tests.codegen.seed import (
    NVSHMEM_SM100,
    PROTOCOLS,
    REFUSED,
    ROOT,
    VARIANTS,
    Variant,
    compiled,
    expressible,
    refused_codes,
)
from tests.helpers import assert_golden

SUFFIX = {"kernels.hip": ".hip", "host.cpp": ".host.cpp", "kernels.cu": ".cu",
          "manifest.json": ".json"}
# nvshmem at sm_100 differs from sm_90 only where counted writes are: goldens for those.
COUNTED = ("counted_broadcast", "counted_gather")
HEADER_VARIANT = {"nccl-cft": "base", "nvshmem-sm100": "add-primitives"}


def golden_stems(variant: Variant) -> list[str]:
    stems = expressible(variant)
    return [s for s in stems if s in COUNTED] if variant is NVSHMEM_SM100 else stems


CASES = [(v, stem) for v in VARIANTS for stem in golden_stems(v)]


@pytest.mark.parametrize(("variant", "stem"), CASES, ids=[f"{v}-{s}" for v, s in CASES])
def test_generated_code_matches_golden(variant: Variant, stem: str, update_golden: bool) -> None:
    files = compiled(stem, variant).files
    for name, text in sorted(files.items()):
        if name == "ccogen_device.cuh":  # one golden per header variant (test_golden.py)
            assert text == (ROOT / "tests" / "golden" / "ccogen_device" /
                            f"{HEADER_VARIANT[variant.name]}.cuh").read_text()
            continue
        assert_golden(ROOT / "tests" / "golden" / variant.name / f"{stem}{SUFFIX[name]}", text,
                      update_golden)


@pytest.mark.parametrize("variant", VARIANTS, ids=str)
def test_exactly_the_expected_protocols_are_refused(variant: Variant) -> None:
    refused = {p.stem: refused_codes(p.stem, variant) for p in PROTOCOLS}
    assert {k: v for k, v in refused.items() if v} == {k: [c] for k, c in REFUSED[variant].items()}


@pytest.mark.parametrize("variant", VARIANTS, ids=str)
def test_generation_is_deterministic(variant: Variant) -> None:
    a = compiled.__wrapped__("two_queue_pipeline", variant)  # type: ignore[attr-defined]
    b = compiled.__wrapped__("two_queue_pipeline", variant)  # type: ignore[attr-defined]
    assert a.files == b.files


def test_no_stale_golden_files() -> None:
    for variant in VARIANTS:
        folder = ROOT / "tests" / "golden" / variant.name
        stems = {p.name.split(".")[0] for p in folder.glob("*")}
        assert stems == set(golden_stems(variant)), f"stale or missing goldens in {folder}"
