"""Strings from the user in generated code (ccogen.codegen.text; issue #29 item 1).

A `.cco` file whose name holds a newline, `#include <stdlib.h>`, a static initializer
calling `system()`, `*/`, backslashes and quotes: the generated kernels.cu / kernels.hip /
host.cpp hold no injected line, equal the normally named file's output with the name
escaped, and still compile (toolchain tests: nvcc for nccl-lsa, clang-22 for mori-sdma).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from ccogen.codegen import generate
from ccogen.codegen.files import GeneratedFiles
from ccogen.codegen.text import UnsafeText, c_string, comment, name
from ccogen.compiler import compile_protocol
from ccogen.errors import DiagnosticError, ToolchainError
from ccogen.instantiate import instantiate
from ccogen.syntax import load_ir

ROOT = Path(__file__).resolve().parents[2]
PLAIN = "plain.cco"
EVIL = ('x\n#include <stdlib.h>\nstatic int pwn = system("touch /tmp/ccogen-pwned");\n'
        '*/ /* \\\n"quoted" \'q\' \r\x1b[31m \u202e tail\\\n.cco')
INJECTED = re.compile(r"^\s*(#\s*include\s*<stdlib\.h>|static int pwn)", re.MULTILINE)


def files_for(target: str, source: str, stem: str = "pingpong") -> dict[str, str]:
    instance, diags = instantiate(load_ir(ROOT / "protocols" / f"{stem}.cco"), 2, {})
    assert instance is not None, diags
    return generate(instance, target, source=source).files


def test_comment_text_is_one_line_that_ends_no_comment() -> None:
    shown = comment(EVIL)
    assert "\n" not in shown and "\r" not in shown and "*/" not in shown
    assert all(ch.isprintable() for ch in shown)
    # every backslash starts an escape: none can splice the next line, whatever follows
    assert re.fullmatch(r"(?:[^\\]|\\(?:x[0-9a-f]{2}|u[0-9a-f]{4}|[nrt/?]))*", shown)
    assert comment("protocols/all-to_all.v2.cco") == "protocols/all-to_all.v2.cco"
    assert comment("a??/") == "a?\\?/"  # no trigraph either
    assert comment("C:\\dir\\") == "C:\\x5cdir\\x5c"


def test_c_string_holds_the_bytes() -> None:
    literal = c_string('a"b\\c\nd\u00e9??=')
    assert literal == '"a\\"b\\\\c\\012d\\303\\251?\\?="'
    assert "\n" not in c_string(EVIL)


def test_a_name_that_is_not_an_identifier_is_refused() -> None:
    assert name("alltoall_2", "window") == "alltoall_2"
    for bad in ("a\nb", "x*/", "", "é", "1a"):
        with pytest.raises(UnsafeText):
            name(bad, "window")


@pytest.mark.parametrize("target", ["nccl-lsa", "nvshmem", "nccl-cft", "mori-sdma"])
def test_an_evil_file_name_injects_nothing(target: str) -> None:
    plain = files_for(target, PLAIN)
    evil = files_for(target, EVIL)
    assert set(plain) == set(evil)
    for file, text in evil.items():
        assert not INJECTED.search(text), file
        assert len(text.splitlines()) == len(plain[file].splitlines()), file
        if file != "manifest.json":  # JSON escapes by itself; the manifest shows the path too
            assert text == plain[file].replace(PLAIN, comment(EVIL)), file
    assert EVIL not in "".join(evil.values())


def test_a_hand_built_ir_name_is_refused_with_a_code() -> None:
    protocol = load_ir(ROOT / "protocols" / "pingpong.cco")
    window = protocol.windows[0]
    evil = dataclasses.replace(protocol, name="pp\n#include <stdlib.h>")
    with pytest.raises(DiagnosticError) as caught:
        compile_protocol(evil, "nccl-lsa", source=PLAIN, ranks=2)
    assert caught.value.diagnostics[0].code == "E042"
    assert "not an ASCII identifier" in caught.value.diagnostics[0].message
    assert window.name.isidentifier()


# ----------------------------------------------------------------------------- toolchain


@pytest.mark.toolchain
def test_the_evil_name_builds_with_nvcc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ccogen.toolchains.cubin import build_cubin
    from tests.runtime.conftest import require_toolchain

    require_toolchain("nccl-lsa")
    monkeypatch.setenv("CCOGEN_CACHE_DIR", str(tmp_path / "cache"))
    GeneratedFiles(files_for("nccl-lsa", EVIL)).write(tmp_path / "gen")
    cubin = build_cubin(tmp_path / "gen", "nccl-lsa", "sm_90", False,
                        extra_flags=("-Werror", "all-warnings"))
    assert cubin.stat().st_size > 0


@pytest.mark.toolchain
def test_the_evil_name_builds_with_clang(tmp_path: Path) -> None:
    from ccogen.toolchains import build_dir

    GeneratedFiles(files_for("mori-sdma", EVIL)).write(tmp_path)
    try:
        result = build_dir(tmp_path)
    except ToolchainError as exc:
        pytest.skip(f"toolchain missing: {exc}")
    assert (tmp_path / "host.o").stat().st_size > 0
    assert result.outputs and all(p.stat().st_size > 0 for p in result.outputs)
    assert b"ccogen-pwned" not in (tmp_path / "host.o").read_bytes()
