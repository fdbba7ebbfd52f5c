"""JSON rendering: a stable array of objects, one per diagnostic (`--format json`).

Field names follow ruff's JSON output where they overlap.  Keys always appear in this
order, the text is indented by 2 and ends with a newline; no diagnostics give `[]`.

    [
      {
        "code": "E021",                      # rule code
        "name": "unsatisfiable-wait",        # rule slug ("" for a code not in RULES)
        "severity": "error",                 # "error" | "warning" | "note"
        "message": "`wait_signal` expects 2 signals but only 1 is ever sent",
        "filename": "protocols/pingpong.cco",         # null without a span
        "location": {"row": 10, "column": 13},        # 1-based; null without a span
        "end_location": {"row": 10, "column": 48},    # exclusive end; null without a span
        "labels": [                          # primary first, then in the order given
          {
            "primary": true,
            "message": "waits for 2 signals from rank 0",   # may be ""
            "filename": "protocols/pingpong.cco",
            "location": {"row": 10, "column": 13},
            "end_location": {"row": 10, "column": 48}
          }
        ],
        "notes": ["..."],                    # possibly empty
        "help": "wait for `expected=1`"      # null when absent
      }
    ]

Rows and columns are 1-based and count characters (Unicode code points); an
`end_location` is the position just after the last character.  Diagnostics are sorted
with `sort_key`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace

from ccogen.diag import Diagnostic, Label, sort_key
from ccogen.diag.codes import RULES
from ccogen.diag.visible import json_visible
from ccogen.source import Span

JsonObject = dict[str, object]


def render(diagnostics: Sequence[Diagnostic], **_opts: object) -> str:
    """The JSON array text of the sorted diagnostics."""
    return json_visible(json.dumps(to_json(diagnostics), indent=2, ensure_ascii=False)) + "\n"


def to_json(diagnostics: Sequence[Diagnostic]) -> list[JsonObject]:
    """The JSON-ready list of the sorted diagnostics."""
    return [diagnostic_json(d) for d in sorted(diagnostics, key=sort_key)]


def diagnostic_json(d: Diagnostic) -> JsonObject:
    span = d.span
    rule = RULES.get(d.code)
    return {
        "code": d.code,
        "name": rule.slug if rule else "",
        "severity": d.sev.value,
        "message": d.message,
        "filename": span.path if span else None,
        "location": _start(span) if span else None,
        "end_location": _end(span) if span else None,
        "labels": [_label_json(label) for label in _ordered_labels(d)],
        "notes": list(d.notes),
        "help": d.help,
    }


def _ordered_labels(d: Diagnostic) -> list[Label]:
    """The primary label (marked primary even if it was only the first) and the others."""
    primary = d.primary
    if primary is None:
        return []
    return [replace(primary, primary=True)] + [x for x in d.labels if x is not primary]


def _label_json(label: Label) -> JsonObject:
    return {
        "primary": label.primary,
        "message": label.message,
        "filename": label.span.path,
        "location": _start(label.span),
        "end_location": _end(label.span),
    }


def _start(span: Span) -> JsonObject:
    return {"row": span.line, "column": span.column}


def _end(span: Span) -> JsonObject:
    return {"row": span.end_line, "column": span.end_column}


__all__ = ["diagnostic_json", "render", "to_json"]
