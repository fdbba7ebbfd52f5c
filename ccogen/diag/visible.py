"""Control characters of user text made visible before a renderer prints them.

A source line, a file name or a name quoted in a message is the user's text, and a
terminal acts on some of its characters: ESC starts an escape sequence (colours,
cursor moves, a window title, OSC 52 clipboard writes), BEL rings, CR moves back over
what was printed, and the bidirectional overrides reorder what is shown ("Trojan
Source").  The text renderers (`full`, `concise`, `github`) show each such character
escaped: `\\x1b` for the C0 controls except tab, DEL and the C1 controls, `\\u202e` for
the Unicode format characters that reorder or break lines.  Tab is kept (the full
renderer expands it).  The JSON renderers escape the same characters as JSON string
escapes (`\\u001b`), which decode to the original text.

`visible` escapes a newline too (a source line has none); `visible_lines` keeps
newlines, for messages and notes whose line breaks are layout.
"""

from __future__ import annotations

# the bidirectional embeddings, overrides and isolates, the marks, and the separators
_FORMAT = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A),
           0x2028, 0x2029)
_CONTROLS = (*(c for c in range(0x20) if c != 0x09), *range(0x7F, 0xA0))


def _table(keep: str) -> dict[int, str]:
    table = {c: f"\\x{c:02x}" for c in _CONTROLS}
    table.update({c: f"\\u{c:04x}" for c in _FORMAT})
    for ch in keep:
        table.pop(ord(ch), None)
    return table


_ALL = _table("")
_LINES = _table("\n")
_JSON = {c: f"\\u{c:04x}" for c in (*range(0x7F, 0xA0), *_FORMAT)}  # json escapes C0 itself


def visible(text: str) -> str:
    """`text` with every control character except tab shown escaped (`\\x1b`)."""
    return text.translate(_ALL)


def visible_lines(text: str) -> str:
    """Like `visible`, but newlines are kept."""
    return text.translate(_LINES)


def json_visible(json_text: str) -> str:
    """JSON text (from `json.dumps`) with DEL, the C1 controls and the format characters
    also written as `\\uXXXX` escapes; the JSON value it denotes is unchanged (such
    characters occur only inside JSON strings)."""
    return json_text.translate(_JSON)


__all__ = ["json_visible", "visible", "visible_lines"]
