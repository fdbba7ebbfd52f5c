"""`launch % K` in generated code: offsets chosen by the device's epoch (codegen.rotate)."""

from __future__ import annotations

import pytest

import ccogen as cg
from ccogen.codegen import generate
from ccogen.codegen.plan import Unsupported
from ccogen.codegen.rotate import by_launch
from ccogen.instantiate import instantiate
from tests.analysis.test_launch_rotation import ROTATED

# these read one rank's program in the text: per-rank functions (tests/codegen/conftest.py)
pytestmark = pytest.mark.usefixtures("per_rank")


def _instance() -> object:
    p = cg.parse(ROTATED.replace("SLOTS", "2"))
    inst, _ = instantiate(p.ir if hasattr(p, "ir") else p, 2)
    assert inst is not None
    return inst


def test_by_launch_picks_the_value_of_the_launch() -> None:
    assert by_launch([0, 128], 2) == "(c.epoch % 2ULL == 1ULL ? 128ULL : 0ULL)"
    assert by_launch([5, 6, 7], 3) == ("(c.epoch % 3ULL == 1ULL ? 6ULL : "
                                       "(c.epoch % 3ULL == 2ULL ? 7ULL : 5ULL))")


@pytest.mark.parametrize("target", ["nccl-lsa", "nvshmem"])
def test_the_landing_slot_follows_the_epoch(target: str) -> None:
    text = generate(_instance(), target, source="rot.cco").files["kernels.cu"]  # type: ignore[arg-type]
    # rank 0 puts into rank 1's slot me=0 (bytes 0 / 128) and copies out slot p=1 (64 / 192)
    assert "(c.epoch % 2ULL == 1ULL ? 128ULL : 0ULL)" in text
    assert "(c.epoch % 2ULL == 1ULL ? 192ULL : 64ULL)" in text


@pytest.mark.parametrize("target", ["nccl-cft", "mori-sdma"])
def test_other_targets_refuse(target: str) -> None:
    with pytest.raises(Unsupported, match="launch % K"):
        generate(_instance(), target, source="rot.cco")  # type: ignore[arg-type]
