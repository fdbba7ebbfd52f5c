"""SARIF 2.1.0 rendering (`--format sarif`), for code-scanning services.

One log with one run:

- `runs[0].tool.driver`: `name` "ccogen", `version`, `informationUri`, and `rules[]`
  generated from `codes.RULES` in registry order: `id` (the code), `name` (the slug),
  `shortDescription.text` (the summary), `fullDescription.text`/`.markdown` (the
  rule's explanation, docs/reference/rules/CODE.md) and `defaultConfiguration.level`.
- `runs[0].columnKind` is `unicodeCodePoints`: columns count characters.
- `runs[0].results[]`, one per diagnostic, sorted with `sort_key`: `ruleId`,
  `ruleIndex` (into `rules[]`, absent for a code not in the registry), `level`
  (`error`/`warning`/`note`), `message.text` (the message, then `help: ...` on a new line
  when there is a help), `locations[0]` (the primary label; none without a span)
  with `physicalLocation.artifactLocation.uri` and `region {startLine, startColumn,
  endLine, endColumn}` (1-based, `endColumn` exclusive) and the label text as its
  `message`, `relatedLocations[]` for the other labels (`id` 1, 2, ... and the label
  text as `message`), and `properties.notes` when the diagnostic has notes.

Relative paths stay relative URIs (forward slashes, percent-encoded); absolute POSIX
paths become `file://` URIs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import PurePosixPath
from urllib.parse import quote

from ccogen._version import __version__
from ccogen.diag import Diagnostic, Label, Severity, sort_key
from ccogen.diag.codes import RULES, Rule
from ccogen.diag.visible import json_visible
from ccogen.source import Span

JsonObject = dict[str, object]

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://pypi.org/project/ccogen/"
_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "note"}
_RULE_INDEX = {code: index for index, code in enumerate(RULES)}


def render(diagnostics: Sequence[Diagnostic], **_opts: object) -> str:
    """The SARIF log as JSON text, indented by 2, ending with a newline."""
    return json_visible(json.dumps(sarif_log(diagnostics), indent=2, ensure_ascii=False)) + "\n"


def sarif_log(diagnostics: Sequence[Diagnostic]) -> JsonObject:
    """The SARIF log as a JSON-ready dict."""
    run: JsonObject = {
        "tool": {"driver": _driver()},
        "columnKind": "unicodeCodePoints",
        "results": [_result(d) for d in sorted(diagnostics, key=sort_key)],
    }
    return {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}


def _driver() -> JsonObject:
    return {
        "name": "ccogen",
        "version": __version__,
        "informationUri": INFORMATION_URI,
        "rules": [_rule(rule) for rule in RULES.values()],
    }


def _rule(rule: Rule) -> JsonObject:
    return {
        "id": rule.code,
        "name": rule.slug,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.explain, "markdown": rule.explain},
        "defaultConfiguration": {"level": _LEVEL[rule.severity]},
    }


def _result(d: Diagnostic) -> JsonObject:
    result: JsonObject = {"ruleId": d.code}
    if d.code in _RULE_INDEX:
        result["ruleIndex"] = _RULE_INDEX[d.code]
    result["level"] = _LEVEL[d.sev]
    result["message"] = {"text": _message_text(d)}
    primary = d.primary
    result["locations"] = [_location(primary)] if primary else []
    others = [label for label in d.labels if label is not primary]
    if others:
        result["relatedLocations"] = [_location(x, n) for n, x in enumerate(others, 1)]
    if d.notes:
        result["properties"] = {"notes": list(d.notes)}
    return result


def _message_text(d: Diagnostic) -> str:
    return d.message if d.help is None else f"{d.message}\nhelp: {d.help}"


def _location(label: Label, ident: int | None = None) -> JsonObject:
    location: JsonObject = {} if ident is None else {"id": ident}
    location["physicalLocation"] = {
        "artifactLocation": {"uri": artifact_uri(label.span.path)},
        "region": _region(label.span),
    }
    if label.message:
        location["message"] = {"text": label.message}
    return location


def _region(span: Span) -> JsonObject:
    return {
        "startLine": span.line,
        "startColumn": span.column,
        "endLine": span.end_line,
        "endColumn": span.end_column,
    }


def artifact_uri(path: str) -> str:
    """A URI reference for a display path: relative stays relative, absolute is `file://`."""
    posix = path.replace("\\", "/")
    encoded = quote(posix, safe="/")
    return f"file://{encoded}" if PurePosixPath(posix).is_absolute() else encoded


__all__ = ["INFORMATION_URI", "SCHEMA_URI", "artifact_uri", "render", "sarif_log"]
