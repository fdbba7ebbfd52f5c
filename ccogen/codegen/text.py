"""The one way a string from the user (a source path, a name) reaches generated code.

Generated files are C++ (CUDA, HIP, plain host C++): a path pasted verbatim into a `//`
comment could end the comment with a newline and inject preprocessor lines and code
(docs/reliability.md, "Security model").  Every such string goes through one of:

* `comment(text)`: the text of a `//` or `/* */` comment.  The result is one line of
  printable characters that can end neither comment: a backslash is `\\x5c` (so no
  backslash can splice the next line, whatever follows it), control characters (newline,
  CR, tab, the C1 and Unicode line/paragraph separators) and invisible format characters
  (bidirectional overrides: "Trojan source") are `\\n`, `\\r`, `\\t`, `\\xNN` or `\\uNNNN`,
  `*/` is `*\\/` and `??` is `?\\?` (no trigraph).  Ordinary paths (`alltoall.cco`,
  `protocols/x-y_2.cco`) come out unchanged, so goldens and `// file.cco:LINE` comments
  read as before.
* `c_string(text)`: a C/C++ string literal (quotes included) holding exactly `text`'s
  UTF-8 bytes: `\\\\`, `\\"`, octal escapes for control characters and non-ASCII bytes
  (octal: a hex escape would swallow the hex digits after it), `?\\?` for `??`.
* `name(text, what)`: a protocol, kernel, window or counter name, which the language
  makes an ASCII identifier; anything else (IR built by hand) is refused with
  `UnsafeText` (E042 at the compiler): escaping cannot keep a name's meaning in a C
  identifier or a manifest entry.

Python decides, Jinja prints: the backends escape while building their view models; the
templates print the results as they are.
"""

from __future__ import annotations

import re
import unicodedata

from ccogen.codegen.unsupported import Unsupported

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class UnsafeText(Unsupported):
    """A string that cannot be written into generated code with its meaning kept."""


def _escaped(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 \
        else f"\\U{code:08x}"


def _unsafe(ch: str) -> bool:
    """Characters shown escaped in a comment: controls, separators, format characters,
    surrogates (an undecodable byte of a file name) and unassigned code points."""
    return ch == "\\" or unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")


def _no_trigraph(text: str) -> str:
    while "??" in text:
        text = text.replace("??", "?\\?")
    return text


def comment(text: str) -> str:
    """`text` as the inside of a `//` or `/* */` comment: one line that cannot end it."""
    out = "".join(_escaped(ch) if _unsafe(ch) else ch for ch in text).replace("*/", "*\\/")
    return _no_trigraph(out)


def c_string(text: str) -> str:
    """A C/C++ string literal whose bytes are `text` in UTF-8."""
    out = ['"']
    for byte in text.encode("utf-8", errors="surrogateescape"):
        ch = chr(byte)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif 0x20 <= byte < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    out.append('"')
    return _no_trigraph("".join(out))


def name(text: str, what: str) -> str:
    """A declared name, which generated code uses as is: an ASCII identifier, else refused."""
    if not isinstance(text, str) or not _IDENTIFIER.match(text):
        raise UnsafeText(f"the {what} name {comment(str(text))!r} is not an ASCII identifier: "
                         "generated code names it in C identifiers and comments (names "
                         "from the text and the builder always are)", None)
    return text


__all__ = ["UnsafeText", "c_string", "comment", "name"]
