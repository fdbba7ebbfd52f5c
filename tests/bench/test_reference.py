"""The hand-written references: manifests beside them, per-instance derivation, launch rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccogen.bench import reference as ref
from ccogen.rt.api import compile_for_run
from ccogen.rt.manifest import load_manifest
from ccogen.syntax import load_ir

ROOT = Path(__file__).resolve().parents[2]
REFS = sorted((ROOT / "benchmarks" / "reference").glob("*/*/manifest.json"))
KIB, MIB = 1 << 10, 1 << 20


def test_three_references_per_target() -> None:
    found = {(p.parent.parent.name, p.parent.name) for p in REFS}
    assert found == {(t, n) for t in ("nccl-lsa", "nvshmem")
                     for n in ("alltoall", "pingpong", "ring_allgather")}


@pytest.mark.parametrize("path", REFS, ids=lambda p: f"{p.parent.parent.name}-{p.parent.name}")
def test_manifest_beside_each_reference_is_valid_and_current(path: Path) -> None:
    manifest = load_manifest(path.parent)  # docs/runtime-abi.md, as the runtime reads it
    spec = ref.load_reference(path.parent)
    assert manifest.target == spec.target == path.parent.parent.name
    assert manifest.protocol == spec.protocol == path.parent.name
    assert [k.symbol for k in manifest.kernels] == [f"ref_{spec.protocol}"]
    assert json.loads(path.read_text()) == ref.default_manifest(spec, ROOT)
    text = spec.kernel_path.read_text()
    assert f"ref_{spec.protocol}(" in text and "ref_epoch(heap)" in text


def test_check_mode_finds_nothing_stale() -> None:
    assert ref.main(["--check"]) == 0


def test_support_code_is_the_same_in_every_reference_of_a_target() -> None:
    for target in ("nccl-lsa", "nvshmem"):
        blocks = set()
        for path in (ROOT / "benchmarks" / "reference" / target).glob("*/kernels.cu"):
            text = path.read_text()
            start = text.index("// ---- reference support")
            blocks.add(text[start:text.index("// ---- end of the reference support")])
        assert len(blocks) == 1, target


@pytest.mark.parametrize(("nbytes", "shape"), [
    (8, (1, 32)), (4 * KIB, (1, 32)), (4 * KIB + 16, (1, 512)), (64 * KIB, (1, 512)),
    (MIB, (16, 512)), (256 * MIB, (128, 512)),
])
def test_launch_rule(nbytes: int, shape: tuple[int, int]) -> None:
    rule = ref.LaunchRule("protocols/alltoall.cco", "block", "peers", bytes_per_cta=64 * KIB)
    assert ref.launch_shape(rule, nbytes) == shape


def test_launch_rule_keeps_the_grid_under_max_grid() -> None:
    rule = ref.LaunchRule("protocols/alltoall.cco", "block", "peers", bytes_per_cta=64 * KIB)
    assert ref.launch_shape(rule, 256 * MIB, units=3) == (42, 512)  # 3 peers x 42 <= 128


def derived(tmp_path: Path, name: str, target: str, nranks: int, max_ctas: int | None = None,
            **params: int) -> dict:
    gen = tmp_path / "gen"
    instance = compile_for_run(load_ir(ROOT / "protocols" / f"{name}.cco"), f"{name}.cco",
                               target, nranks, params, gen, debug=False, epoch_from_heap=True,
                               max_ctas=max_ctas)
    spec = ref.find_reference(name, target)
    assert spec is not None and instance is not None
    out = ref.write_case(spec, gen, tmp_path / "ref")
    assert (out / "kernels.cu").read_text() == spec.kernel_path.read_text()
    load_manifest(out)  # valid for the runtime
    return json.loads((out / "manifest.json").read_text())


def test_derived_manifest_keeps_the_generated_layout(tmp_path: Path) -> None:
    m = derived(tmp_path, "alltoall", "nccl-lsa", 4, block=8)
    gen = json.loads((tmp_path / "gen" / "manifest.json").read_text())
    assert m["windows"] == gen["windows"] and m["signals"] == gen["signals"]
    assert m["heap_size"] == gen["heap_size"] + 64 * KIB
    assert m["kernels"][0]["grid"] == 3 and m["kernels"][0]["block"] == 32  # one warp per peer
    assert not m["kernels"][0]["cooperative"]
    flags = m["nvcc_flags"]
    assert "-DREF_NRANKS=4" in flags and "-DREF_P_BLOCK=8ULL" in flags
    assert f"-DREF_SCRATCH={gen['heap_size']}ULL" in flags
    send = next(w for w in gen["windows"] if w["name"] == "send")
    assert f"-DREF_W_SEND={send['offset']}ULL" in flags
    assert f"-DREF_S_SEND={send['size']}ULL" in flags


def test_large_sizes_take_many_ctas_per_peer(tmp_path: Path) -> None:
    m = derived(tmp_path, "alltoall", "nvshmem", 2, max_ctas=128, block=16 * MIB)
    assert m["kernels"][0]["grid"] == 128 and m["kernels"][0]["block"] == 512
    assert m["kernels"][0]["params"] == ["heap", "epoch", "debug"] and "nccl" not in m


def test_the_reference_grid_follows_the_generated_sm_budget(tmp_path: Path) -> None:
    m = derived(tmp_path, "alltoall", "nvshmem", 4, block=16 * MIB)  # the default budget, 32
    assert m["kernels"][0]["grid"] == 30  # 3 peers x 10 CTAs <= 32


def test_pingpong_reference_times_itself(tmp_path: Path) -> None:
    m = derived(tmp_path, "pingpong", "nccl-lsa", 2, rounds=16)
    assert ref.timer_offset(m) == m["heap_size"] - 64 * KIB + 8
    assert "-DREF_P_ROUNDS=16ULL" in m["nvcc_flags"]
    assert ref.timer_offset(derived(tmp_path / "b", "alltoall", "nccl-lsa", 2)) is None


def test_bad_reference_manifests(tmp_path: Path) -> None:
    from ccogen.rt.errors import ManifestError

    (tmp_path / "manifest.json").write_text(json.dumps({"kernels": [], "target": "nvshmem"}))
    with pytest.raises(ManifestError, match="needs a `reference` object"):
        ref.load_reference(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({
        "target": "nvshmem", "protocol": "x", "kernels": [{"name": "k", "params": []}],
        "reference": {"protocol_file": "x.cco", "param": "n", "units": "all"}}))
    with pytest.raises(ManifestError, match="`one` or `peers`"):
        ref.load_reference(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({
        "target": "nvshmem", "protocol": "x", "kernels": [{"name": "k", "params": []}],
        "reference": {"protocol_file": "x.cco", "param": "n", "speed": 3}}))
    with pytest.raises(ManifestError, match="speed"):
        ref.load_reference(tmp_path)
    assert ref.find_reference("no_such_protocol", "nccl-lsa") is None
