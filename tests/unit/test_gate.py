"""What a pipeline reads: the gate's exit code for every kind of end, the JUnit document (parsed back), the
thresholds table in the text report, and ``csibench gate`` itself against a run served by a stub fetch."""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree

import pytest

from csibench import cli
from csibench.report.render import render_table
from csibench.report.verdicts import EXIT_BROKEN, EXIT_INCONCLUSIVE, EXIT_NOT_MEASURED, EXIT_PASS, gate, junit

MET = {"subject": "createVolume", "metric": "throughput", "bound": ">= 1", "measured": 2.0, "met": True,
       "message": "createVolume throughput 2 within >= 1"}
BROKEN = {"subject": "createVolume", "metric": "latencyP99", "bound": "<= 2", "measured": 3.0, "met": False,
          "message": "createVolume latencyP99 3 > 2 (max)"}
UNMEASURED = {"subject": "workload seqRead", "metric": "mibps", "bound": ">= 100", "met": None,
              "message": "workload seqRead mibps: not measured"}


def _run(phase: str, thresholds: list[dict[str, Any]], **status: Any) -> dict[str, Any]:
    steps = [{"name": "createVolume", "state": "Succeeded", "objects": 3, "succeeded": 3, "durationSeconds": 1.5,
              "throughput": 2.0, "latency": {"p50": 1.0, "p90": 2.0, "p99": 3.0, "max": 3.0, "mean": 1.2}},
             {"name": "deleteVolume", "state": "Succeeded", "objects": 3, "succeeded": 3, "durationSeconds": 0.5,
              "throughput": 6.0}]
    return {"metadata": {"namespace": "bench", "name": "r1"}, "spec": {"storageClassName": "sim"},
            "status": {"phase": phase, "steps": steps, "thresholds": thresholds, "message": "m",
                       "totalStepSeconds": 2.0, **status}}


@pytest.mark.parametrize(("phase", "thresholds", "code", "first"), [
    ("Succeeded", [MET], EXIT_PASS, "PASS bench/r1: all 1 thresholds met"),
    ("Succeeded", [], EXIT_PASS, "PASS bench/r1: measured; no thresholds set"),
    ("Succeeded", [MET, BROKEN], EXIT_BROKEN, "FAIL bench/r1: 1 of 2 thresholds broken"),
    ("Succeeded", [MET, UNMEASURED], EXIT_INCONCLUSIVE, "INCONCLUSIVE bench/r1: a threshold could not be judged"),
    ("Failed", [MET], EXIT_NOT_MEASURED, "NOT MEASURED bench/r1: the run failed to measure: m"),
])
def test_the_gates_exit_code_for_each_end(phase: str, thresholds: list[dict[str, Any]], code: int,
                                          first: str) -> None:
    result = gate(_run(phase, thresholds))
    assert result.code == code and result.lines[0] == first
    assert len(result.lines) == 1 + len(thresholds)


def test_a_running_run_has_no_verdict() -> None:
    with pytest.raises(ValueError, match="has not finished"):
        gate(_run("Running", []))


def test_junit_has_a_testcase_per_step_row_and_threshold_and_fails_the_broken_bound() -> None:
    run = _run("Succeeded", [MET, BROKEN, UNMEASURED], dataPath=[
        {"name": "seqRead", "state": "Failed", "message": "fio exited 1", "durationSeconds": 9.0}],
        database=[{"kind": "run", "scale": 1, "mode": "readOnly", "clients": 4, "state": "Succeeded"}])
    suite = ElementTree.fromstring(junit(run).split("\n", 1)[1])
    cases = {(c.get("classname"), c.get("name")): c for c in suite.findall("testcase")}
    assert list(cases) == [("csibench.run", "bench/r1"), ("csibench.step", "createVolume"),
                           ("csibench.step", "deleteVolume"),
                           ("csibench.dataPath", "seqRead"), ("csibench.database", "scale 1 readOnly 4 clients"),
                           ("csibench.threshold", "createVolume throughput >= 1"),
                           ("csibench.threshold", "createVolume latencyP99 <= 2"),
                           ("csibench.threshold", "workload seqRead mibps >= 100")]
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == \
        ("8", "1", "1", "1")
    failure = cases[("csibench.threshold", "createVolume latencyP99 <= 2")].find("failure")
    assert failure is not None and failure.get("message") == "createVolume latencyP99 3 > 2 (max)"
    error = cases[("csibench.dataPath", "seqRead")].find("error")
    assert error is not None and "fio exited 1" in (error.get("message") or "")
    assert cases[("csibench.step", "createVolume")].get("time") == "1.500"


def test_junit_is_well_formed_whatever_a_message_holds_and_a_failed_run_is_an_error() -> None:
    odd = dict(BROKEN, message='fio said "no" <&> \x01\x08\x1b[31m red')
    run = _run("Failed", [odd], message="CleanupIncomplete: 1 claim left", dataPath=[
        {"name": "seqRead", "state": "Pending"}])
    suite = ElementTree.fromstring(junit(run).split("\n", 1)[1])  # parses: no control character got through
    cases = {(c.get("classname"), c.get("name")): c for c in suite.findall("testcase")}
    error = cases[("csibench.run", "bench/r1")].find("error")
    assert error is not None and "CleanupIncomplete" in (error.get("message") or "")
    failure = cases[("csibench.threshold", "createVolume latencyP99 <= 2")].find("failure")
    assert failure is not None and (failure.get("message") or "").startswith('fio said "no" <&> ')
    assert cases[("csibench.dataPath", "seqRead")].find("skipped") is not None  # pending: not an error


def test_the_text_report_shows_the_thresholds_and_the_verdict() -> None:
    text = render_table(_run("Succeeded", [MET, BROKEN], verdict="Fail"))
    assert "Thresholds (verdict: Fail)" in text
    line = next(line for line in text.splitlines() if "latencyP99" in line and "<= 2" in line)
    assert line.split()[-1] == "BROKEN"


def test_the_gate_command_waits_for_the_end_and_writes_junit(monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    served = iter([_run("Running", []), _run("CleaningUp", []), _run("Succeeded", [BROKEN])])
    monkeypatch.setattr(cli, "_fetch", lambda args, *runs: [next(served)])
    out = tmp_path / "junit.xml"
    code = cli.main(["gate", "bench/r1", "--interval", "0", "--junit", str(out)])
    assert code == EXIT_BROKEN
    assert capsys.readouterr().out.startswith("FAIL bench/r1: 1 of 1 thresholds broken")
    assert ElementTree.fromstring(out.read_text().split("\n", 1)[1]).get("failures") == "1"


def test_the_gate_command_gives_up_with_exit_2(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli, "_fetch", lambda args, *runs: [_run("Running", [])])
    assert cli.main(["gate", "bench/r1", "--interval", "0", "--timeout", "0"]) == EXIT_NOT_MEASURED
    assert "did not end within 0 s" in capsys.readouterr().err

    def missing(args: Any, *runs: str) -> list[dict[str, Any]]:
        raise cli.CliError("BenchmarkRun bench/r1 not found", cli.EXIT_NOT_FOUND)
    monkeypatch.setattr(cli, "_fetch", missing)
    assert cli.main(["gate", "bench/r1"]) == EXIT_NOT_MEASURED


def _comparison(change: str) -> dict[str, Any]:
    return {"run": "bench/base", "change": change, "thresholdPercent": 10.0,
            "rows": [{"subject": "createVolume", "metric": "throughput", "change": change,
                      "message": f"createVolume throughput: {change}"}],
            "message": f"against bench/base (10% threshold): 1 {change.lower()}"}


@pytest.mark.parametrize(("change", "code", "first"), [
    ("Regression", EXIT_BROKEN, "FAIL bench/r1: a regression against bench/base"),
    ("Inconclusive", EXIT_INCONCLUSIVE, "INCONCLUSIVE bench/r1: inconclusive against bench/base"),
    ("Equivalent", EXIT_PASS, "PASS bench/r1: all 1 thresholds met; Equivalent against bench/base"),
    ("Improvement", EXIT_PASS, "PASS bench/r1: all 1 thresholds met; Improvement against bench/base"),
])
def test_the_gate_reads_the_runs_own_baseline_comparison(change: str, code: int, first: str) -> None:
    result = gate(_run("Succeeded", [MET], baseline=_comparison(change)))
    assert (result.code, result.lines[0]) == (code, first)
    assert result.lines[-1] == f"  baseline: against bench/base (10% threshold): 1 {change.lower()}"


def test_a_broken_threshold_and_a_regression_are_both_named() -> None:
    result = gate(_run("Succeeded", [BROKEN], baseline=_comparison("Regression")))
    assert result.lines[0] == "FAIL bench/r1: 1 of 1 thresholds broken; a regression against bench/base"


def test_junit_fails_a_regression_row() -> None:
    suite = ElementTree.fromstring(junit(_run("Succeeded", [], baseline=_comparison("Regression"))).split("\n", 1)[1])
    case = next(c for c in suite.findall("testcase") if c.get("classname") == "csibench.baseline")
    assert case.get("name") == "createVolume throughput" and case.find("failure") is not None


def _repeated_run(name: str, throughputs: list[float]) -> dict[str, Any]:
    run = _run("Succeeded", [])
    run["metadata"]["name"] = name
    run["status"]["steps"] = run["status"]["steps"][:1]
    run["status"]["aggregates"] = [{"name": "createVolume", "iterations": len(throughputs),
                                    "throughputs": throughputs, "durations": [3 / x for x in throughputs],
                                    "throughput": {"median": sorted(throughputs)[1], "min": min(throughputs),
                                                   "max": max(throughputs)},
                                    "durationSeconds": {"median": 1.0, "min": 1.0, "max": 1.0}}]
    run["status"]["iterations"] = {"current": 3, "total": 3, "done": 3, "failed": 0, "summary": "3/3"}
    return run


@pytest.mark.parametrize(("a", "b", "code", "verdict"), [
    ([10.0, 12.0, 9.0], [0.6, 0.7, 0.65], EXIT_BROKEN, "Regression"),
    ([100.0, 104.0, 97.0, 101.0, 99.0], [99.0, 102.0, 100.0, 98.0, 101.5], EXIT_PASS, "Equivalent"),
    ([10.0, 12.0, 9.0], [8.0, 14.0, 10.5], EXIT_INCONCLUSIVE, "Inconclusive"),
])
def test_compare_with_max_regression_exits_with_the_judgement(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str], a: list[float],
                                                              b: list[float], code: int, verdict: str) -> None:
    runs = {"a": _repeated_run("a", a), "b": _repeated_run("b", b)}
    monkeypatch.setattr(cli, "_fetch", lambda args, *names: [runs[n.rpartition("/")[2]] for n in names])
    assert cli.main(["compare", "bench/a", "bench/b", "--max-regression", "10%"]) == code
    assert f"regression check, B against A: {verdict}" in capsys.readouterr().out


def test_compare_says_when_the_two_runs_differ_in_shape(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    runs = {"a": _repeated_run("a", [10.0, 12.0, 9.0]), "b": _repeated_run("b", [0.6, 0.7, 0.65])}
    runs["a"]["spec"] = {"storageClassName": "slow", "volumes": 2}
    runs["b"]["spec"] = {"storageClassName": "fast", "volumes": 12}
    monkeypatch.setattr(cli, "_fetch", lambda args, *names: [runs[n.rpartition("/")[2]] for n in names])
    assert cli.main(["compare", "bench/a", "bench/b", "--max-regression", "10%"]) == EXIT_BROKEN
    assert '  shapes differ: storageClassName "slow" vs "fast", volumes 2 vs 12\n' in capsys.readouterr().out


def test_gate_with_a_baseline_compares_on_the_client(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    runs = {"r1": _repeated_run("r1", [0.6, 0.7, 0.65]), "base": _repeated_run("base", [10.0, 12.0, 9.0])}
    monkeypatch.setattr(cli, "_fetch", lambda args, *names: [runs[n.rpartition("/")[2]] for n in names])
    assert cli.main(["gate", "bench/r1", "--baseline", "bench/base", "--max-regression", "50"]) == EXIT_BROKEN
    assert capsys.readouterr().out.startswith("FAIL bench/r1: a regression against bench/base")
    with pytest.raises(SystemExit) as refused:
        cli.main(["gate", "bench/r1", "--baseline", "bench/base", "--max-regression", "ten"])
    assert refused.value.code == 2 and "not a percentage: 'ten'" in capsys.readouterr().err


def test_the_ci_gate_example_is_a_valid_run_with_a_baseline_and_thresholds() -> None:
    import yaml

    from csibench.api.models import BenchmarkRunSpec
    from localcluster.launcher import REPO_ROOT

    body = yaml.safe_load((REPO_ROOT / "examples" / "ci-gate.yaml").read_text())
    spec = BenchmarkRunSpec.model_validate(body["spec"])
    assert spec.baseline and spec.thresholds and spec.repeat >= 5


def test_the_alerts_read_metrics_the_operator_exports() -> None:
    import re

    import yaml
    from prometheus_client import CollectorRegistry

    from csibench.metrics import VERDICTS, Metrics
    from localcluster.launcher import REPO_ROOT

    rule = yaml.safe_load((REPO_ROOT / "deploy" / "components" / "alerts" / "prometheusrule.yaml").read_text())
    text = yaml.safe_dump(rule)
    names = set(re.findall(r"csibench_[a-z_]+", text))
    registry = CollectorRegistry()
    Metrics(registry)
    exported = {metric.name for metric in registry.collect()}
    assert names and names <= exported, names - exported
    assert set(re.findall(r'verdict="(\w+)"', text)) <= set(VERDICTS)


HOSTILE = "x\ufffe\uffff\x00\x01\x1b[31m <&>\"' \ud800 \U0001f600 \u202e end"


def _hostile_run(time: float) -> dict[str, Any]:
    """A run with hostile text in every field JUnit writes, and ``time`` as every time."""
    step = {"name": f"createVolume{HOSTILE}", "state": "Succeeded", "objects": 3, "succeeded": 3,
            "durationSeconds": time, "throughput": 2.0, "latency": {"p99": 0.000125}}
    failed = dict(step, state="Failed", failed=1, failureReasons=[{"count": 1, "reason": HOSTILE,
                                                                   "message": HOSTILE}])
    return {"metadata": {"namespace": f"bench{HOSTILE}", "name": f"r1{HOSTILE}"},
            "status": {"phase": "Failed", "message": HOSTILE, "totalStepSeconds": time,
                       "steps": [step, failed, dict(step, state="Pending")],
                       "dataPath": [{"name": HOSTILE, "state": s, "message": HOSTILE, "durationSeconds": time}
                                    for s in ("Succeeded", "Failed", "Pending")],
                       "database": [{"kind": "run", "scale": 1, "mode": HOSTILE, "clients": 4, "state": s,
                                     "message": HOSTILE, "durationSeconds": time}
                                    for s in ("Succeeded", "Failed", "Pending")],
                       "baseline": {"run": HOSTILE, "change": "Regression", "thresholdPercent": 10.0,
                                    "message": HOSTILE,
                                    "rows": [{"subject": HOSTILE, "metric": HOSTILE, "change": change,
                                              "message": HOSTILE}
                                             for change in ("Regression", "Slower", "Inconclusive",
                                                            "Equivalent", "Improvement")]},
                       "thresholds": [dict(BROKEN, subject=HOSTILE, metric=HOSTILE, bound=HOSTILE,
                                           message=HOSTILE, met=met) for met in (True, False, None)]}}


@pytest.mark.parametrize("time", [1.5, -1.0, float("nan"), float("inf"), 0.0004])
def test_junit_validates_against_the_junit_10_schema_whatever_the_text_and_times(time: float) -> None:
    # issue 42 point 6: `assertions` is not in the schema, U+FFFE/U+FFFF broke well-formedness, names were not
    # cleaned, and a negative or NaN time was written. junit-10.xsd is the schema pytest ships (tests/data).
    import xmlschema

    from localcluster.launcher import REPO_ROOT

    schema = xmlschema.XMLSchema(str(REPO_ROOT / "tests" / "data" / "junit-10.xsd"))
    for run in (_hostile_run(time), _run("Succeeded", [MET, BROKEN, UNMEASURED], totalStepSeconds=time)):
        document = junit(run)
        schema.validate(document)
        suite = ElementTree.fromstring(document.split("\n", 1)[1])
        for case in suite.iter("testcase"):
            assert case.get("time") is None or float(case.get("time") or "") >= 0
    suite = ElementTree.fromstring(junit(_hostile_run(time)).split("\n", 1)[1])
    names = [case.get("name") or "" for case in suite.iter("testcase")]
    assert any(name.startswith("benchx\N{REPLACEMENT CHARACTER}\N{REPLACEMENT CHARACTER}") for name in names)


def _slower(fail_on_slower: bool) -> dict[str, Any]:
    comparison = _comparison("Slower")
    comparison["failOnSlower"] = fail_on_slower
    comparison["rows"][0]["message"] = "createVolume throughput: 0.82x: Slower (significantly slower, not shown ...)"
    return comparison


@pytest.mark.parametrize(("fail_on_slower", "code", "first"), [
    (False, EXIT_PASS, "PASS bench/r1: all 1 thresholds met; Slower against bench/base"),
    (True, EXIT_BROKEN, "FAIL bench/r1: significantly slower than bench/base (failOnSlower)"),
])
def test_slower_fails_the_gate_and_junit_only_when_the_spec_asks(fail_on_slower: bool, code: int,
                                                                   first: str) -> None:
    # issue 42 point 1: "significantly slower, not shown beyond the threshold" is its own outcome
    run = _run("Succeeded", [MET], baseline=_slower(fail_on_slower))
    result = gate(run)
    assert (result.code, result.lines[0]) == (code, first)
    suite = ElementTree.fromstring(junit(run).split("\n", 1)[1])
    case = next(c for c in suite.findall("testcase") if c.get("classname") == "csibench.baseline")
    if fail_on_slower:
        assert case.find("failure") is not None
    else:  # a passed case with the words
        out = case.find("system-out")
        assert case.find("failure") is None and case.find("skipped") is None
        assert out is not None and "Slower (significantly slower" in (out.text or "")


def test_compare_with_max_regression_exits_1_on_slower_only_when_asked(monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    runs = {"a": _repeated_run("a", [10.0, 10.6, 9.5]), "b": _repeated_run("b", [8.2, 8.9, 7.8])}
    monkeypatch.setattr(cli, "_fetch", lambda args, *names: [runs[n.rpartition("/")[2]] for n in names])
    assert cli.main(["compare", "bench/a", "bench/b", "--max-regression", "10%"]) == EXIT_PASS
    assert "regression check, B against A: Slower" in capsys.readouterr().out
    assert cli.main(["compare", "bench/a", "bench/b", "--max-regression", "10%", "--fail-on-slower"]) == EXIT_BROKEN
