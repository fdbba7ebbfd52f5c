"""`sim.report`: the verdict of a simulation: passed, failed, or not finished."""

from __future__ import annotations

from ccogen.diag import error
from ccogen.sim.report import InstanceReport, SimReport, SimResult


def _result(passed: bool) -> SimResult:
    failures = [] if passed else [error("E031", "data race", None)]
    return SimResult("exhaustive-0", None, passed, failures, None, None, [], False)


def _report(*instances: InstanceReport) -> SimReport:
    return SimReport("p", "p.cco", 2, list(instances))


def _instance(n: int, *results: SimResult, limit: str = "") -> InstanceReport:
    return InstanceReport(f"nranks={n}", n, list(results), exhaustive=True,
                          complete=not limit, limit=limit)


def test_an_instance_that_explored_nothing_is_not_finished_not_failed() -> None:
    report = _report(_instance(2, _result(True)), _instance(8, limit="stopped after 10 s"))
    assert not report.passed and report.inconclusive
    summary = report.summary()
    assert "not finished: the exploration ran out of its budget before one schedule " \
           "completed (nranks=8 stopped after 10 s); schedules explored: nranks=2: 1" in summary


def test_a_failure_anywhere_is_a_failure() -> None:
    report = _report(_instance(2, _result(False)), _instance(8, limit="stopped after 10 s"))
    assert not report.passed and not report.inconclusive
    assert "1 schedule failed" in report.summary()
    assert "nranks=8 stopped after 10 s" in report.summary()


def test_a_partial_exploration_that_passed_says_how_far_it_got() -> None:
    report = _report(_instance(4, _result(True), _result(True), limit="stopped after 10 s"))
    assert report.passed and not report.inconclusive
    assert report.summary().endswith(
        "all passed (not exhaustive: nranks=4 stopped after 10 s with 2 schedules explored)")
