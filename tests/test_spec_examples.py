"""Every example of the language reference parses, lints clean, simulates, survives
`fmt` and compiles for the GPU targets (nccl-lsa, nvshmem).

The reference is docs/reference/language.md; its Python builder examples build the same
protocols as its text examples (v1: `alltoall`, v2: `allreduce_oneshot`).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import ccogen as cg
from ccogen.compiler import compile_protocol
from ccogen.driver import check_text
from ccogen.sim import simulate
from ccogen.syntax import parse_ir
from ccogen.syntax.format import format_text

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "docs" / "reference" / "language.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", SPEC.read_text(encoding="utf-8"), re.S)


PROTOCOLS = [b for b in _blocks() if re.search(r"^\s*protocol \w+\(", b, re.M)]
BUILDERS = [b for b in _blocks() if "import ccogen as cg" in b]
NAMES = [re.search(r"protocol (\w+)", b).group(1) for b in PROTOCOLS]  # type: ignore[union-attr]


def test_the_reference_has_its_examples() -> None:
    assert len(PROTOCOLS) >= 4 and BUILDERS


@pytest.mark.parametrize("text", PROTOCOLS, ids=NAMES)
def test_example_lints_without_errors(text: str) -> None:
    result = check_text(text, "spec.cco")
    errors = [d for d in result.diagnostics if d.is_error]
    assert not errors, cg.render(errors)
    assert result.instances, "the example was not instantiated"


@pytest.mark.parametrize("text", PROTOCOLS, ids=NAMES)
def test_example_survives_fmt(text: str) -> None:
    formatted = format_text(text, "spec.cco")
    assert parse_ir(formatted) == parse_ir(text)
    assert format_text(formatted) == formatted
    assert "# protocols/alltoall.cco" in formatted or "# protocols/" not in text


@pytest.mark.parametrize("text", PROTOCOLS, ids=NAMES)
def test_example_simulates(text: str) -> None:
    report = simulate(text, ranks=[2, 3] if "team lsa(2)" not in text else [2], seeds=2)
    assert report.passed, report.summary()
    assert not [d for d in report.diagnostics if d.is_error]


@pytest.mark.parametrize("target", ["nccl-lsa", "nvshmem"])
@pytest.mark.parametrize("text", PROTOCOLS, ids=NAMES)
def test_example_compiles(text: str, target: str) -> None:
    ranks = 2 if "team lsa(2)" in text else 4  # 4: every branch of the examples runs
    compiled = compile_protocol(parse_ir(text, "spec.cco"), target, source="spec.cco",
                                ranks=ranks)
    kernels = compiled.files["kernels.cu"]
    # every op of the example is generated, each under its `// spec.cco:LINE` comment
    lines = {int(n) for n in re.findall(r"// spec\.cco:(\d+)", kernels)}
    op = re.compile(r"\s+(put|get|copy|reduce|signal|wait_signal|wait_count|quiet|barrier|"
                    r"commit)\(")
    ops = {i for i, line in enumerate(text.splitlines(), start=1) if op.match(line)}
    assert ops <= lines, f"ops of lines {sorted(ops - lines)} are not generated"


def test_the_v2_builder_example_equals_the_text() -> None:
    v2 = next(b for b in BUILDERS if "cg.dtype" in b)
    namespace: dict[str, object] = {}
    exec(compile(v2, str(SPEC), "exec"), namespace)
    built = namespace["p"]
    assert isinstance(built, cg.Protocol)
    text = next(t for t, n in zip(PROTOCOLS, NAMES, strict=True) if n == "allreduce_oneshot")
    assert built == dataclasses.replace(parse_ir(text), doc=None)
    assert cg.parse(built.to_source()) == built


def test_builder_example_equals_the_text() -> None:
    namespace: dict[str, object] = {}
    exec(compile(BUILDERS[0], str(SPEC), "exec"), namespace)
    built = namespace["p"]
    assert isinstance(built, cg.Protocol)
    alltoall = next(t for t, n in zip(PROTOCOLS, NAMES, strict=True) if n == "alltoall")
    # the text example also has a docstring and an `ensure`, and calls the lane variable `p`
    text_ir = dataclasses.replace(parse_ir(alltoall), doc=None, ensure=())
    assert parse_ir(re.sub(r"\bpeer\b", "p", built.to_source())) == text_ir
    assert cg.parse(built.to_source()) == built


RUNTIME = ("alltoallv", "counted_rows", "moe_dispatch_small")  # language v2 §3, §4, §7


@pytest.mark.parametrize("name", RUNTIME)
def test_runtime_examples_simulate_once_per_draw(name: str) -> None:
    assert name in NAMES, f"the reference lost its `{name}` example"
    text = PROTOCOLS[NAMES.index(name)]
    report = simulate(text, ranks=[2], seeds=1)
    labels = [i.label for i in report.instances]
    assert len(labels) >= 5 and all("contents" in x for x in labels), labels
    assert report.passed, report.summary()


@pytest.mark.parametrize("target", ["nccl-lsa", "nvshmem"])
@pytest.mark.parametrize("name", RUNTIME)
def test_runtime_examples_compile(name: str, target: str) -> None:
    """Language v2 §3, §4, §7: the run-time examples generate code that reads their
    counts on the device (`ccogen compile`, no E042)."""
    from ccogen.compiler import compile_protocol

    text = PROTOCOLS[NAMES.index(name)]
    files = compile_protocol(parse_ir(text, "spec.cco"), target, source="spec.cco",
                             ranks=2).files
    assert "ccogen_ld<int32_t>(c, " in files["kernels.cu"]


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["nccl-lsa", "nvshmem"])
@pytest.mark.parametrize("name", RUNTIME)
def test_runtime_examples_build(name: str, target: str, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    """... and that code builds with the real nvcc and headers, without a warning."""
    from ccogen.rt.api import compile_for_run
    from ccogen.toolchains.cubin import build_cubin
    from tests.runtime.conftest import require_toolchain

    require_toolchain(target)
    monkeypatch.setenv("CCOGEN_CACHE_DIR", str(tmp_path / "cache"))
    text = PROTOCOLS[NAMES.index(name)]
    out = tmp_path / "gen"
    compile_for_run(parse_ir(text, "spec.cco"), "spec.cco", target, 2, {}, out, debug=False)
    cubin = build_cubin(out, target, "sm_90", False, extra_flags=("-Werror", "all-warnings"))
    assert Path(cubin).is_file() and Path(cubin).stat().st_size > 0
