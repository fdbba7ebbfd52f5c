"""The JSON renderer: field names, order, locations and a round trip."""

from __future__ import annotations

import json
from typing import Any

from ccogen.diag import Diagnostic
from ccogen.diag.render_json import render

KEYS = [
    "code",
    "name",
    "severity",
    "message",
    "filename",
    "location",
    "end_location",
    "labels",
    "notes",
    "help",
]
LABEL_KEYS = ["primary", "message", "filename", "location", "end_location"]


def _loaded(diagnostics: list[Diagnostic]) -> list[dict[str, Any]]:
    text = render(diagnostics)
    assert text.endswith("\n")
    data: list[dict[str, Any]] = json.loads(text)
    return data


def test_round_trip_of_a_diagnostic_with_labels(unsatisfiable: Diagnostic) -> None:
    [item] = _loaded([unsatisfiable])
    assert list(item) == KEYS
    assert item == {
        "code": "E021",
        "name": "unsatisfiable-wait",
        "severity": "error",
        "message": "`wait_signal` expects 2 signals but only 1 is ever sent",
        "filename": "protocols/pingpong.cco",
        "location": {"row": 13, "column": 13},
        "end_location": {"row": 13, "column": 48},
        "labels": [
            {
                "primary": True,
                "message": "waits for 2 signals from rank 0",
                "filename": "protocols/pingpong.cco",
                "location": {"row": 13, "column": 13},
                "end_location": {"row": 13, "column": 48},
            },
            {
                "primary": False,
                "message": "the only signalled put",
                "filename": "protocols/pingpong.cco",
                "location": {"row": 10, "column": 13},
                "end_location": {"row": 11, "column": 33},
            },
        ],
        "notes": [
            "rank 0 sends to rank 1 on queue 0: 1 signal per epoch",
            "every schedule hangs here",
        ],
        "help": "wait for `expected=1`, or send a second signalled put",
    }


def test_label_keys_are_stable(region_mismatch: Diagnostic) -> None:
    [item] = _loaded([region_mismatch])
    labels: list[dict[str, Any]] = item["labels"]
    for label in labels:
        assert list(label) == LABEL_KEYS
    assert [label["filename"] for label in labels] == [
        "protocols/pingpong.cco",
        "protocols/pingpong.cco",
        "examples/build.py",
    ]


def test_spanless_diagnostic_has_null_location(deadlock: Diagnostic) -> None:
    [item] = _loaded([deadlock])
    assert item["filename"] is None
    assert item["location"] is None
    assert item["end_location"] is None
    assert item["labels"] == []
    assert item["help"] is None


def test_sorted_and_indented(all_diagnostics: list[Diagnostic]) -> None:
    items = _loaded(all_diagnostics)
    assert [item["code"] for item in items] == ["E030", "W107", "E003", "E021"]
    assert [item["severity"] for item in items] == ["error", "warning", "error", "error"]
    assert render(all_diagnostics).startswith('[\n  {\n    "code": "E030",\n')


def test_nothing_renders_an_empty_array() -> None:
    assert render([]) == "[]\n"
