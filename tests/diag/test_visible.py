"""Control characters of a source line, a path or a message never reach the terminal
raw (issue #29 item 7): every renderer shows them escaped, and the marks still point
at the right columns."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ccogen.diag import error
from ccogen.diag.render import RENDERERS
from ccogen.diag.render_full import render_one
from ccogen.diag.visible import json_visible, visible, visible_lines
from ccogen.source import SourceFile, Span

# ESC ] 0 ; title BEL (set the window title), ESC [ 2 J (clear the screen), a C1 CSI,
# a right-to-left override, DEL
HOSTILE = "\x1b]0;pwn\x07\x1b[2J\x9b31m\u202e\x7f"
SHOWN = "\\x1b]0;pwn\\x07\\x1b[2J\\x9b31m\\u202e\\x7f"
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\x7f")


def test_visible_escapes_controls_but_keeps_tabs_and_text() -> None:
    assert visible(HOSTILE) == SHOWN
    assert visible("a\tb é ∑") == "a\tb é ∑"
    assert visible("a\nb\rc\x00") == "a\\x0ab\\x0dc\\x00"
    assert visible_lines("a\nb\x1b") == "a\nb\\x1b"
    for c in range(0x3000):
        shown = visible(chr(c))
        assert all(not (0 <= ord(ch) < 0x20 and ch != "\t") and not 0x7F <= ord(ch) < 0xA0
                   for ch in shown), hex(c)


def test_json_escapes_decode_to_the_same_text() -> None:
    text = json.dumps({"m": HOSTILE}, ensure_ascii=False)
    safe = json_visible(text)
    assert not any(ch in safe for ch in RAW)
    assert json.loads(safe) == {"m": HOSTILE}


def _diagnostic(line: str, needle: str, path: str = "p.cco") -> tuple[SourceFile, Span]:
    text = f"protocol p():\n{line}\n"
    file = SourceFile(path, text)
    start = text.index(needle)
    return file, Span(file, start, start + len(needle))


def test_full_excerpt_is_escaped_and_the_marks_point_after_it() -> None:
    line = f'    put(1, signal="{HOSTILE}", queue=zz)'
    _, span = _diagnostic(line, "zz")
    out = render_one(error("E002", "`zz` is not a declared queue", span, "here"))
    assert not any(ch in out for ch in RAW)
    source, marks = [x for x in out.splitlines() if x.startswith("2 |") or "^" in x]
    assert SHOWN in source
    # the `^^` sits under `zz` of the line as printed
    assert source.index("zz") == marks.index("^^")


def test_full_marks_under_the_control_characters_cover_their_escapes() -> None:
    line = f'    put(1, signal="{HOSTILE}")'
    _, span = _diagnostic(line, f'"{HOSTILE}"')
    out = render_one(error("E002", "bad signal", span, "here"))
    source, marks = [x for x in out.splitlines() if x.startswith("2 |") or "^" in x]
    begin = source.index(f'"{SHOWN}"')
    assert marks.index("^") == begin
    assert marks.count("^") == len(f'"{SHOWN}"')


@pytest.mark.parametrize("fmt", sorted(RENDERERS))
def test_every_renderer_escapes_path_message_and_excerpt(fmt: str) -> None:
    _, span = _diagnostic(f"    x{HOSTILE}y", "x", path=f"evil{HOSTILE}.cco")
    d = error("E002", f"`{HOSTILE}` is unknown", span, f"label{HOSTILE}",
              notes=[f"note{HOSTILE}"], help=f"help{HOSTILE}")
    out = RENDERERS[fmt]([d], color=False)
    assert not any(ch in out for ch in RAW), repr(out)
    if fmt in ("json", "sarif"):
        assert any(f"`{HOSTILE}` is unknown" in s for s in _strings(json.loads(out)))  # lossless
    else:
        assert SHOWN in out


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_crlf_sources_show_no_escaped_carriage_return() -> None:
    text = "protocol p():\r\n    team lsa(2)\r\n"
    file = SourceFile("p.cco", text)
    start = text.index("lsa")
    out = render_one(error("E002", "m", Span(file, start, start + 3), "l"))
    assert "\\x0d" not in out and "\r" not in out


def test_lint_prints_no_raw_escape(tmp_path: Path) -> None:
    src = tmp_path / "esc.cco"
    src.write_bytes(b"protocol p():\n    team lsa(2)\n    window w: 8 B\n"
                    b"    kernel k(threads=32):\n"
                    b'        put(1, dst=w, src=w, signal="\x1b]0;pwn\x07\x1b[2J")\n')
    proc = subprocess.run([sys.executable, "-m", "ccogen", "lint", str(src)],
                          capture_output=True, check=False)
    assert proc.returncode == 1, proc
    assert b"\x1b" not in proc.stdout and b"\x07" not in proc.stdout
    assert b'signal="\\x1b]0;pwn\\x07\\x1b[2J"' in proc.stdout
