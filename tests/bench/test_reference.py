"""The hand-written references: manifests beside them, per-instance derivation, launch rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccogen.bench import reference as ref
from ccogen.errors import DiagnosticError
from ccogen.manifest import load_manifest
from ccogen.rt.api import compile_for_run
from ccogen.syntax import load_ir

ROOT = Path(__file__).resolve().parents[2]
REFS = sorted((ROOT / "benchmarks" / "reference").glob("*/*/manifest.json"))
KIB, MIB = 1 << 10, 1 << 20


# The references of each target (benchmarks/reference/README.md's table).
EXPECTED = {
    "nccl-lsa": {"alltoall", "pingpong", "ring_allgather", "allreduce_oneshot",
                 "allreduce_twoshot", "alltoallv", "moe_dispatch", "moe_combine"},
    "nvshmem": {"alltoall", "pingpong", "ring_allgather", "allreduce_oneshot",
                "allreduce_twoshot", "alltoallv", "moe_dispatch", "moe_combine"},
}


def test_the_references_of_each_target() -> None:
    found = {(p.parent.parent.name, p.parent.name) for p in REFS}
    assert found == {(t, n) for t, names in EXPECTED.items() for n in names}


def _ids(path: Path) -> str:
    return f"{path.parent.parent.name}-{path.parent.name}"


@pytest.mark.parametrize("path", REFS, ids=_ids)
def test_manifest_beside_each_reference_is_valid_and_current(path: Path) -> None:
    manifest = load_manifest(path.parent)  # docs/runtime-abi.md, as the runtime reads it
    spec = ref.load_reference(path.parent)
    assert manifest.target == spec.target == path.parent.parent.name
    assert manifest.protocol == spec.protocol == path.parent.name
    assert [k.symbol for k in manifest.kernels] == [f"ref_{spec.protocol}"]
    try:
        expected = default_manifest(spec)
    except DiagnosticError as exc:
        if not ref.pending_codegen(exc):
            raise
        pytest.skip(f"code generation of the protocol is pending ({exc}): after it lands, "
                    "`python -m ccogen.bench.reference` rewrites this manifest")
    assert json.loads(path.read_text()) == expected
    text = spec.kernel_path.read_text()
    assert f"ref_{spec.protocol}(" in text and "ref_epoch(heap)" in text


_DEFAULTS: dict[Path, dict] = {}
# The MoE protocols' default (prefill: 4096 tokens) instances take minutes to check and
# generate.  Their references' manifests are checked through a small instance of the
# same protocol (these tokens, every other parameter its default): its generated code
# gives everything but the sizes, the default declarations the sizes, through the
# backend's own heap planner and manifest (`predicted_manifest`).
# test_a_small_instance_predicts_the_generated_manifest checks that this gives the
# generated manifest exactly, from one small instance to a larger one.
# Large enough that the rows spread over the whole CTA budget (codegen.spread: at 2 ranks
# and hidden 7168 bf16, 4 items per token, 16 warps per CTA: the grid reaches the budget
# of 32 CTAs at 128 tokens), so that the small instance's grid is the default's.
SMALL_TOKENS = {"moe_dispatch": 128, "moe_combine": 128}


_REAL_DEFAULT = ref.default_manifest  # tests below patch ref.default_manifest with this one


def default_manifest(spec: ref.ReferenceSpec, repo: Path = ROOT, nranks: int = 2) -> dict:
    """`ref.default_manifest`, once per reference and session; through a small instance
    for the MoE protocols (SMALL_TOKENS)."""
    assert repo == ROOT and nranks == 2
    if spec.directory not in _DEFAULTS:
        if spec.protocol in SMALL_TOKENS:
            generated = predicted_manifest(spec.rule.protocol_file, spec.target,
                                           SMALL_TOKENS[spec.protocol], {})
            _DEFAULTS[spec.directory] = ref.derive_manifest(spec, generated)
        else:
            _DEFAULTS[spec.directory] = _REAL_DEFAULT(spec, ROOT)
    return _DEFAULTS[spec.directory]


def predicted_manifest(protocol_file: str, target: str, tokens: int,
                       params: dict[str, int]) -> dict:
    """The generated manifest.json of `protocol_file` at `params` (2 ranks, as
    `ref.default_manifest` compiles it), from the code generated at `tokens` tokens."""
    from dataclasses import replace

    from ccogen.codegen import Options
    from ccogen.codegen.backends import get_backend
    from ccogen.compiler import compile_protocol
    from ccogen.instantiate.declarations import (
        bind_dtype_params,
        bind_params,
        declare,
        is_dtype_param,
    )
    from ccogen.instantiate.findings import Findings
    from ccogen.ir.evaluate import Compiler

    path = ROOT / protocol_file
    protocol = load_ir(path)
    small = compile_protocol(protocol, target, source=path.name, ranks=2,
                             params={"tokens": tokens}, epoch_from_heap=True).instance
    options = Options(epoch_from_heap=True)
    backend = get_backend(target)
    backend.generate(small, path.name, options)  # the backend's per-instance choices
    # the model `generate` prints: folded over the ranks, whose inline decision (and so the
    # manifest's `-maxrregcount`) is taken on the folded steps, not on `model`'s
    model, layout = backend.printed_model(small, path.name, options)  # type: ignore[attr-defined]
    findings, compiler = Findings(2), Compiler()
    types = bind_dtype_params(protocol, params, findings)
    bound = bind_params(protocol, 2, {k: v for k, v in params.items()
                                      if not is_dtype_param(protocol, k)}, compiler, findings)
    assert types is not None and bound is not None, findings.diagnostics()
    decl = declare(protocol, 2, bound, types, compiler, findings)
    big = replace(small, params=tuple(bound.items()),
                  window_sizes=tuple((n, size) for n, size in decl.windows.items()
                                     if size is not None),
                  buffer_sizes=tuple((n, m.nbytes) for n, m in decl.memories.items()
                                     if m is not None and m.buffer))
    big_layout = backend.plan_layout(big, layout.scratch.size // 8)  # type: ignore[attr-defined]
    manifest = backend.manifest(model, big_layout, big, options)  # type: ignore[attr-defined]
    return json.loads(json.dumps(manifest))


@pytest.mark.parametrize("target", ["nccl-lsa", "nvshmem"])
@pytest.mark.parametrize("name", sorted(SMALL_TOKENS))
def test_a_small_instance_predicts_the_generated_manifest(name: str, target: str,
                                                           tmp_path: Path) -> None:
    """What `default_manifest` relies on: the generated manifest at twice SMALL_TOKENS,
    predicted from the code generated at SMALL_TOKENS, is the one generated there."""
    path = ROOT / "protocols" / f"{name}.cco"
    small = SMALL_TOKENS[name]
    compile_for_run(load_ir(path), path.name, target, 2, {"tokens": 2 * small}, tmp_path,
                    debug=False, epoch_from_heap=True)
    generated = json.loads((tmp_path / "manifest.json").read_text())
    del generated["generated"]  # the seal hashes the kernels, which are not predicted
    predicted = predicted_manifest(f"protocols/{name}.cco", target, small,
                                   {"tokens": 2 * small})
    assert predicted == generated
    # the sizes did move: the prediction is not the small instance's manifest
    assert predicted["heap_size"] != predicted_manifest(f"protocols/{name}.cco", target, small,
                                                        {"tokens": small})["heap_size"]


def test_check_mode_finds_nothing_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ref, "default_manifest", default_manifest)
    assert ref.main(["--check"]) == 0


def _block(path: Path, name: str) -> str:
    text = path.read_text()
    start = text.index(f"// ---- {name} support")
    return text[start:text.index(f"// ---- end of the {name} support")]


def test_support_code_is_the_same_in_every_reference_of_a_target() -> None:
    for target in ("nccl-lsa", "nvshmem"):
        paths = list((ROOT / "benchmarks" / "reference" / target).glob("*/kernels.cu"))
        assert len(paths) == len(EXPECTED[target])
        assert len({_block(path, "reference") for path in paths}) == 1, target


def test_reduction_code_is_the_same_in_every_allreduce_reference() -> None:
    paths = list((ROOT / "benchmarks" / "reference").glob("*/allreduce_*/kernels.cu"))
    assert len(paths) == 4
    blocks = {_block(path, "reduction") for path in paths}
    assert len(blocks) == 1
    text = blocks.pop()  # numbers every element type as reference.py's REF_T_* macros do
    for dtype, code in ref.DTYPE_CODES.items():
        assert f"#define REF_{dtype.upper()} {code}\n" in text, dtype


@pytest.mark.toolchain
@pytest.mark.parametrize("path", REFS, ids=_ids)
def test_reference_builds_with_the_real_toolchain(path: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """nvcc against the real NCCL / NVSHMEM headers, warnings as errors (CI builds them)."""
    from ccogen.toolchains.cubin import build_cubin
    from tests.runtime.conftest import require_toolchain

    target = path.parent.parent.name
    require_toolchain(target)
    monkeypatch.setenv("CCOGEN_CACHE_DIR", str(tmp_path / "cache"))
    cubin = build_cubin(path.parent, target, "sm_90", extra_flags=("-Werror", "all-warnings"))
    assert Path(cubin).is_file() and Path(cubin).stat().st_size > 0


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
    from ccogen.errors import ManifestError

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


def typed_generated(chunk: int, dtype: str = "bf16", nranks: int = 2) -> dict:
    """A generated manifest of allreduce_twoshot's layout (language v2: typed windows), as
    docs/runtime-abi.md describes it."""
    item = {"bf16": 2, "f32": 4}[dtype]
    size = nranks * chunk * item
    return {"abi": 1, "target": "nvshmem", "protocol": "allreduce_oneshot", "nranks": nranks,
            "params": {"n": chunk}, "queues": 1, "heap_size": 2 * size + 4096, "max_ctas": 32,
            "windows": [{"name": "x", "offset": 0, "size": size, "dtype": dtype,
                         "shape": [size // item]}],
            "buffers": [{"name": "out", "dtype": dtype, "shape": [chunk], "access": "write"}],
            "between_launches": "free", "signals": {"offset": size, "count": nranks},
            "counters": [], "kernels": []}


def test_a_typed_parameter_counts_elements(tmp_path: Path) -> None:
    spec = ref.find_reference("allreduce_oneshot", "nvshmem")
    assert spec is not None and spec.rule.elements_of == "x"
    small = ref.derive_manifest(spec, typed_generated(2048))  # 4 KiB of bf16: one warp
    assert small["kernels"][0]["grid"] == 1 and small["kernels"][0]["block"] == 32
    big = ref.derive_manifest(spec, typed_generated(4096))  # 8 KiB: a CTA of 512
    assert big["kernels"][0]["block"] == 512
    wide = ref.derive_manifest(spec, typed_generated(1 << 20, "f32"))  # 4 MiB: the budget
    assert wide["kernels"][0]["grid"] == 32
    assert ref.derive_manifest(spec, typed_generated(1 << 14, "f32"))["kernels"][0]["grid"] == 2


def test_typed_windows_and_buffers_reach_the_reference(tmp_path: Path) -> None:
    spec = ref.find_reference("allreduce_oneshot", "nvshmem")
    assert spec is not None
    generated = typed_generated(1 << 16, "f32")
    m = ref.derive_manifest(spec, generated)
    assert m["windows"] == generated["windows"] and m["buffers"] == generated["buffers"]
    assert m["between_launches"] == "free"
    assert "-DREF_T_X=REF_F32" in m["nvcc_flags"] and "-DREF_T_OUT=REF_F32" in m["nvcc_flags"]
    assert m["kernels"][0]["params"][-1] == "buffer:out"
    assert m["reference"]["elements_of"] == "x"
    (tmp_path / "kernels.cu").write_text("")
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    loaded = load_manifest(tmp_path)  # valid for the runtime, buffers and all
    assert [b.name for b in loaded.buffers] == ["out"]
    untyped = {k: v for k, v in generated.items() if k not in ("buffers", "between_launches")}
    untyped["windows"] = [{"name": "x", "offset": 0, "size": 1 << 18}]
    plain = ref.derive_manifest(spec, untyped)  # a v1 manifest: u8, no buffers, no macros
    assert "buffers" not in plain and "between_launches" not in plain
    assert not any(f.startswith("-DREF_T_") for f in plain["nvcc_flags"])


def test_byte_rules_keep_their_manifests_unchanged() -> None:
    spec = ref.find_reference("alltoall", "nccl-lsa")
    assert spec is not None and spec.rule.elements_of == ""
    data = json.loads((spec.directory / "manifest.json").read_text())
    assert "elements_of" not in data["reference"]


def test_elements_of_must_name_a_window_or_buffer(tmp_path: Path) -> None:
    from dataclasses import replace

    from ccogen.errors import ManifestError

    spec = ref.find_reference("allreduce_oneshot", "nccl-lsa")
    assert spec is not None
    bad = replace(spec, rule=replace(spec.rule, elements_of="y"))
    with pytest.raises(ManifestError, match="`elements_of` names `y`"):
        ref.derive_manifest(bad, typed_generated(1024))


def test_check_mode_reports_references_whose_codegen_is_pending(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from ccogen.diag import Diagnostic

    def pending(spec: ref.ReferenceSpec, repo: Path, nranks: int = 2) -> dict:
        raise DiagnosticError([Diagnostic(
            "E042", "code generation for `reduce` is not implemented yet")])

    monkeypatch.setattr(ref, "default_manifest", pending)
    assert ref.main(["--check"]) == 0  # nothing can be compared, nothing is stale
    assert capsys.readouterr().err.count("pending ") == len(REFS)

    def broken(spec: ref.ReferenceSpec, repo: Path, nranks: int = 2) -> dict:
        raise DiagnosticError([Diagnostic("E001", "a real error")])

    monkeypatch.setattr(ref, "default_manifest", broken)
    with pytest.raises(DiagnosticError):  # any other diagnostic is not swallowed
        ref.main(["--check"])


def test_alltoallv_reference_sizes_its_grid_from_the_capacity(tmp_path: Path) -> None:
    """Run-time counts (language v2 §3): the grid covers `cap` elements per peer, whatever
    the counts turn out to be; the caller's `send` and `counts` reach the kernel."""
    m = derived(tmp_path, "alltoallv", "nccl-lsa", 4, cap=1 << 20)  # 2 MiB of bf16 per peer
    assert m["kernels"][0]["grid"] == 30 and m["kernels"][0]["block"] == 512  # budget 32
    assert m["kernels"][0]["params"][-2:] == ["buffer:send", "buffer:counts"]
    assert "-DREF_P_CAP=1048576ULL" in m["nvcc_flags"] and m["nccl"] == {"lsa_barrier_count": 0}
    small = derived(tmp_path / "s", "alltoallv", "nvshmem", 2, cap=64)
    assert small["kernels"][0]["grid"] == 1 and small["kernels"][0]["block"] == 32


def test_a_reference_that_orders_nothing_between_launches_keeps_host_sync(
        tmp_path: Path) -> None:
    # protocols/alltoall.cco opens each launch with a barrier (back to back: `free`); the
    # hand-written kernel does not, so its rule says `host_sync` and its manifest keeps it
    m = derived(tmp_path, "alltoall", "nvshmem", 2, block=8)
    gen = json.loads((tmp_path / "gen" / "manifest.json").read_text())
    assert gen["between_launches"] == "free"
    assert m["between_launches"] == "host_sync" and m["reference"]["host_sync"] is True
    spec = ref.find_reference("allreduce_oneshot", "nvshmem")  # its kernel barriers itself
    assert spec is not None and not spec.rule.host_sync
    data = json.loads((spec.directory / "manifest.json").read_text())
    assert "host_sync" not in data["reference"]


# ---- moe_combine's reference: its work split run on the CPU (no GPU here) ----
COMBINE = {t: ROOT / "benchmarks" / "reference" / t / "moe_combine" / "kernels.cu"
           for t in ("nccl-lsa", "nvshmem")}
HOST = ROOT / "tests" / "bench" / "data" / "moe_combine_host.cpp"
# The kernel's loop heads that tests/bench/data/moe_combine_host.cpp plays (it calls the
# schedule block's functions the same way): if one changes, the host check must follow.
LOOP_HEADS = (
    "share[p] = ref_share(count_of[p], cta, gridDim.x);",
    "const uint64_t chunks = ref_pieces(pairs, warps, REF_COPY_CHUNKS);",
    "for (uint64_t j = warp; j < pairs * chunks; j += warps) {",
    "ref_row_item(j, chunks, share, me, cta, gridDim.x, &p, &t, &lo, &hi);",
    "for (uint64_t i = lane; i < REF_P_K; i += 32) mine = mine || route[i] == me;",
    "const uint64_t mine_n = share[me];",
    "const uint64_t parts = ref_pieces(mine_n, warps, REF_SUM_CHUNKS);",
    "for (uint64_t j = warp; j < mine_n * parts; j += warps) {",
    "ref_sum_item(j, parts, cta, gridDim.x, &t, &lo, &hi);",
    "if (w[p] == 0.0f) continue;",
)


def _between(text: str, start: str, end: str) -> str:
    return text[text.index(start):text.index(end)]


def test_the_combine_reference_is_one_body_on_both_targets() -> None:
    """Only the pointers and signals differ between the targets: the combine itself (from
    the row macros to the kernel's entry point) is the same text, and holds the loop heads
    the host check below plays."""
    bodies = {_between(path.read_text(), "#define REF_ROW", 'extern "C"')
              for path in COMBINE.values()}
    assert len(bodies) == 1
    body = bodies.pop()
    for head in LOOP_HEADS:
        assert head in body, head
    assert "ntok[0]" in body and "REF_P_TOKENS" in body


@pytest.fixture(scope="module")
def combine_host(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """Build moe_combine_host.cpp with the reference's schedule block, once per shape."""
    import shutil
    import subprocess

    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    text = COMBINE["nccl-lsa"].read_text()
    block = _between(text, "// ---- combine schedule", "// ---- end of the combine schedule")
    root = tmp_path_factory.mktemp("combine-host")
    prelude = root / "schedule.h"
    prelude.write_text("#include <cstdint>\n#define __host__\n#define __device__\n"
                       "#define __forceinline__ inline\n" + block)
    built: dict[tuple[int, int, int, int], Path] = {}

    def build(nranks: int, tokens: int, k: int, hidden: int) -> Path:
        key = (nranks, tokens, k, hidden)
        if key not in built:
            exe = root / f"host-{nranks}-{tokens}-{k}-{hidden}"
            subprocess.run([cxx, "-std=c++17", "-O1", "-Wall", "-Werror",
                            f"-DREF_NRANKS={nranks}", f"-DREF_P_TOKENS={tokens}ULL",
                            f"-DREF_P_K={k}ULL", f"-DREF_ROW={4 * hidden}ULL",
                            "-include", str(prelude), str(HOST), "-o", str(exe)], check=True)
            built[key] = exe
        return built[key]

    return build


# (ranks, tokens, k, hidden f32, CTAs, warps): the rule's grid (4 tokens a CTA) at these
# tokens, 16 warps of 512 threads; rows of 32 B to 16 KiB, so that rows are cut into 1 to
# 4 pieces for the copy and 1 to 8 for the sums.
COMBINE_SHAPES = [(2, 8, 8, 4096, 2, 16), (3, 5, 2, 8, 2, 16), (4, 16, 4, 2048, 4, 16),
                  (2, 128, 8, 1792, 32, 16), (2, 64, 8, 4096, 16, 16)]


@pytest.mark.parametrize(("nranks", "tokens", "k", "hidden", "ctas", "warps"), COMBINE_SHAPES)
def test_combine_reference_meets_the_ensure_for_every_count(
        combine_host, tmp_path: Path, nranks: int, tokens: int, k: int, hidden: int,  # type: ignore[no-untyped-def]
        ctas: int, warps: int) -> None:
    """The reference's rows back and sums, played on the CPU for every rank, CTA and warp
    (moe_combine_host.cpp), give `y` as protocols/moe_combine.cco's `ensure` says for
    counts 0, the capacity and between, each rank its own: rows below the count are the
    weighted sums (`ccogen.reference.moe.combine`), rows past it are left as they were."""
    import subprocess

    import numpy as np

    from ccogen.reference import moe

    assert ref.launch_shape(ref.load_reference(COMBINE["nvshmem"].parent).rule, tokens)[0] \
        == min(ctas, 32)
    exe = combine_host(nranks, tokens, k, hidden)
    rng = np.random.default_rng(tokens * 100 + nranks)
    picks = [[0] * nranks, [tokens] * nranks, [tokens // 2 + 1] * nranks,
             [tokens if r % 2 else 0 for r in range(nranks)],
             [int(c) for c in rng.integers(0, tokens + 1, nranks)]]
    for counts in picks:
        tables = [rng.integers(0, nranks, (tokens, k)).astype(np.int32) for _ in range(nranks)]
        weights = [rng.random((tokens, k), dtype=np.float32) for _ in range(nranks)]
        expert = [rng.standard_normal((nranks, tokens, hidden)).astype(np.float32)
                  for _ in range(nranks)]
        y0 = [rng.standard_normal((tokens, hidden)).astype(np.float32) for _ in range(nranks)]
        with open(tmp_path / "in.bin", "wb") as f:
            for r in range(nranks):
                f.write(np.int32(counts[r]).tobytes() + tables[r].tobytes()
                        + weights[r].tobytes() + expert[r].tobytes() + y0[r].tobytes())
        done = subprocess.run([str(exe), str(ctas), str(warps), str(tmp_path / "in.bin"),
                               str(tmp_path / "out.bin")], capture_output=True, text=True)
        assert done.returncode == 0, (counts, done.stderr)
        ys = np.fromfile(tmp_path / "out.bin", dtype=np.float32).reshape(nranks, tokens, hidden)
        expected = moe.combine(expert, tables, weights)
        for r in range(nranks):
            n = counts[r]
            np.testing.assert_allclose(ys[r][:n], expected[r][:n], rtol=1e-5, atol=1e-5,
                                       err_msg=f"counts {counts}, rank {r}")
            assert np.array_equal(ys[r][n:], y0[r][n:]), (counts, r)
