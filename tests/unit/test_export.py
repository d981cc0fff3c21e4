"""``csibench export`` and ``--from DIR``: what export writes reads back as the cluster's runs did (history,
report, compare), reports of the previous schema version are read from it, and a newer one is refused by name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from csibench import cli
from csibench.report.archive import ArchiveError, folder_name, matches

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
V1_OUTPUT = json.loads((GOLDEN / "report-v1-output.json").read_text())


def _run(name: str, at: str, create: float) -> dict[str, Any]:
    return {"metadata": {"namespace": "bench", "name": name, "creationTimestamp": at},
            "spec": {"storageClassName": "sim", "volumes": 10, "steps": ["createVolume", "deleteVolume"]},
            "status": {"phase": "Succeeded", "completionTime": at, "steps": [
                {"name": "createVolume", "state": "Succeeded", "throughput": create, "objects": 10, "succeeded": 10,
                 "latency": {"p50": 0.1, "p90": 0.2, "p99": 1 / create, "max": 1.0, "mean": 0.1}},
                {"name": "deleteVolume", "state": "Succeeded", "throughput": 5.0 + create / 100}]}}


def _runs() -> list[dict[str, Any]]:
    runs = [_run(f"r{i}", f"2026-12-0{1 + i}T10:00:00Z", c) for i, c in enumerate([10.0, 10.2, 9.9, 5.0, 5.1])]
    for run in runs:
        run["metadata"]["labels"] = {"pipeline": "release"}
    return runs


def _serve(monkeypatch: pytest.MonkeyPatch, runs: list[dict[str, Any]], report: dict[str, Any] | None) -> None:
    by_name = {f"{r['metadata']['namespace']}/{r['metadata']['name']}": r for r in runs}
    monkeypatch.setattr(cli, "_fetch", lambda args, *names: [by_name[name] for name in names]
                        if not getattr(args, "from_dir", None) else original_fetch(args, *names))
    monkeypatch.setattr(cli, "_list_runs", lambda args, selector: [r for r in runs if matches(
        r["metadata"].get("labels") or {}, selector)])
    monkeypatch.setattr(cli, "_load_report", lambda args, run: report if not args.from_dir
                        else original_load(args, run))


original_fetch = cli._fetch
original_load = cli._load_report


def _out(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert cli.main(list(argv)) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def test_history_from_an_export_is_the_history_the_cluster_showed(monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str],
                                                                  tmp_path: Path) -> None:
    runs = _runs()
    _serve(monkeypatch, runs, V1_OUTPUT["report"])
    before = _out(capsys, "history", "-n", "bench", "-l", "pipeline=release", "--window", "2")
    assert "Regression" in before
    printed = _out(capsys, "export", "-n", "bench", "-l", "pipeline=release", str(tmp_path)).split()
    assert [Path(p).name for p in printed] == [folder_name(r) for r in runs]
    assert printed[0].endswith("20261201T100000Z-bench-r0")
    folder = tmp_path / "20261201T100000Z-bench-r0"
    assert {p.name for p in folder.iterdir()} >= {"run.json", "report.json", "junit.xml", "steps.csv"}
    _serve(monkeypatch, [], None)  # the runs are gone from the cluster
    after = _out(capsys, "history", "-n", "bench", "-l", "pipeline=release", "--window", "2", "--from", str(tmp_path))
    assert after == before
    assert "Create Volume" in _out(capsys, "compare", "bench/r0", "bench/r4", "--from", str(tmp_path))


def test_export_of_named_runs_and_report_from_it(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    runs = _runs()
    _serve(monkeypatch, runs, V1_OUTPUT["report"])
    cluster = json.loads(_out(capsys, "report", "bench/r1", "-o", "json"))
    _out(capsys, "export", "bench/r1", "bench/r2", str(tmp_path))
    assert len(list(tmp_path.iterdir())) == 2
    _serve(monkeypatch, [], None)
    archived = json.loads(_out(capsys, "report", "bench/r1", "-o", "json", "--from", str(tmp_path)))
    assert archived == cluster and archived["report"]["format"] == "csibench.io/report-v1"  # the previous version
    assert cli.main(["report", "bench/r3", "--from", str(tmp_path)]) == cli.EXIT_NOT_FOUND
    assert "BenchmarkRun bench/r3 not found in" in capsys.readouterr().err


def test_a_newer_report_in_an_export_is_a_clear_error(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    runs = _runs()
    _serve(monkeypatch, runs, {"format": "csibench.io/report-v3", "schemaVersion": 3, "steps": []})
    _out(capsys, "export", "bench/r1", str(tmp_path))
    assert cli.main(["report", "bench/r1", "-o", "json", "--from", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "has schema version 3; this csibench reads versions 1 to 2" in err and "Traceback" not in err


def test_export_needs_runs_or_a_selector_and_the_selector_is_evaluated_as_the_api_does() -> None:
    assert cli.main(["export", "/tmp/nowhere"]) == 1
    labels = {"a": "1", "b": "2"}
    assert matches(labels, "a=1,b") and matches(labels, "a==1,!c") and not matches(labels, "a!=1")
    assert not matches(labels, "c") and not matches(labels, "b=3")
    with pytest.raises(ArchiveError, match="equality selectors only"):
        matches(labels, "a in (1,2)")


def test_without_the_plotting_extra_export_writes_everything_but_the_page(monkeypatch: pytest.MonkeyPatch,
                                                                          capsys: pytest.CaptureFixture[str],
                                                                          tmp_path: Path) -> None:
    from csibench.report import html
    from csibench.report.plots import PlottingUnavailable

    def unavailable(run: dict[str, Any], report: dict[str, Any] | None) -> str:
        raise PlottingUnavailable("the HTML report needs matplotlib: pip install 'csibench[report]'")

    monkeypatch.setattr(html, "build_run_html", unavailable)
    _serve(monkeypatch, _runs(), None)
    assert cli.main(["export", "bench/r1", str(tmp_path)]) == 0
    assert "no report.html: the HTML report needs matplotlib" in capsys.readouterr().err
    (folder,) = tmp_path.iterdir()
    assert {p.name for p in folder.iterdir()} == {"run.json", "junit.xml", "steps.csv"}


def test_export_of_a_suites_runs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                 tmp_path: Path) -> None:
    runs = _runs()
    _serve(monkeypatch, runs, None)
    monkeypatch.setattr(cli, "_fetch_suite", lambda args, name: ({"metadata": {"name": "sweep"}}, runs[:2])
                        if name == "bench/sweep" else None)
    assert [Path(p).name for p in _out(capsys, "export", "--suite", "bench/sweep", str(tmp_path)).split()] == \
        [folder_name(r) for r in runs[:2]]
    assert cli.main(["export", "--suite", "bench/other", str(tmp_path)]) == cli.EXIT_NOT_FOUND
    assert "BenchmarkSuite bench/other not found" in capsys.readouterr().err
    assert cli.main(["export", "--suite", "bench/sweep", "-l", "a=b", str(tmp_path)]) == 1
