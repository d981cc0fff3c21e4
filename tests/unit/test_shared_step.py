"""The sharedVolume step: its probe run for real (three processes on one directory, as three nodes on one share),
its logs read back into rows, the step against the in-memory API server, its report table and admission rules."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from csibench.api import histogram
from csibench.api.models import BenchmarkRunSpec, SharedPhase, SharedRow, StepState
from csibench.engine.observed import Observed
from csibench.engine.step import StepContext
from csibench.engine.steps.shared import probe
from csibench.engine.steps.shared import step as shared_step
from csibench.engine.steps.shared.entry import PROBE_SOURCE, build_probe_command
from csibench.engine.steps.shared.rows import PodReport, build_rows, histograms_of, read_log
from csibench.report import shared as shared_report
from tests.support.fake_kube import Behaviour, FakeKube
from tests.support.fake_runs import NAMES, owned_left, run, spec
from tests.support.shared_probe import probe_workload

PODS, FILES, ROUNDS, SMALL, LISTED, FIO = 3, 12, 40, 50, 300, 1


def run_probes(root: Path, pods: int = PODS, **options: int) -> list[tuple[int, str]]:
    """The probe as the pods run it (python3 -c <source>), one process per pod at once on one directory."""
    settings = {"files": FILES, "lock-rounds": ROUNDS, "small-files": SMALL, "list-files": LISTED, "timeout": 60,
                "attempt": 1, "fio-seconds": FIO, "fio-bytes": 4 << 20,
                **{key.replace("_", "-"): value for key, value in options.items()}}
    started = [subprocess.Popen([sys.executable, "-c", PROBE_SOURCE, f"--pod={i}", f"--pods={pods}",
                                 f"--root={root}", *(f"--{key}={value}" for key, value in settings.items())],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(pods)]
    return [(process.wait(timeout=120), process.communicate()[0]) for process in started]


@pytest.fixture(scope="module")
def probe_logs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    ended = run_probes(tmp_path_factory.mktemp("share"))
    assert [code for code, _ in ended] == [0] * PODS, [log for _, log in ended]
    return [log for _, log in ended]


def reports_of(logs: list[str]) -> list[PodReport]:
    return [read_log(f"pod-{i}", f"node-{i}", log) for i, log in enumerate(logs)]


def test_the_probes_bins_are_fios_so_histograms_merge_exactly() -> None:
    for index in range(probe.PLAT_NR):  # every bin's value falls in that bin again
        assert probe.plat_index(probe.plat_value(index)) == index
    for value in (0, 1, 127, 128, 1000, 123_456, 9_876_543, 10**10):
        binned = probe.plat_value(probe.plat_index(value))
        assert abs(binned - value) <= value / 128 + 1, (value, binned)
    assert probe.plat_value(probe.plat_index(10**12)) == probe.plat_value(probe.PLAT_NR - 1)  # fio's last bin
    samples = probe.Samples()
    for value in (1_000_000, 2_000_000, 3_000_000):
        samples.add(value)
    assert samples.count == 3 and samples.max_ns == 3_000_000
    assert histogram.percentiles(histogram.from_json(samples.fields()["bins"]), (50.0,))[50.0] == \
        probe.plat_value(probe.plat_index(2_000_000))


def test_three_probes_on_one_share_measure_every_phase_and_their_checks_hold(probe_logs: list[str]) -> None:
    reports = reports_of(probe_logs)
    assert all(r.error is None for r in reports)
    rows = {row.phase: row for row in build_rows(reports, LISTED, FIO)}
    assert list(rows) == list(SharedPhase)
    assert all(row.state == StepState.SUCCEEDED for row in rows.values()), rows
    assert all((row.pods, row.nodes) == (PODS, PODS) for row in rows.values())
    assert rows[SharedPhase.VISIBILITY].operations == FILES * (PODS - 1)  # a sample per round and reader
    assert rows[SharedPhase.VISIBILITY].opsPerSecond is None
    assert rows[SharedPhase.LOCK].operations == PODS * ROUNDS and rows[SharedPhase.LOCK].lostUpdates == 0
    for phase in (SharedPhase.CREATE, SharedPhase.STAT, SharedPhase.DELETE):
        assert rows[phase].operations == PODS * SMALL, phase
    assert rows[SharedPhase.STAT].missing == 0
    assert (rows[SharedPhase.LIST].entries, rows[SharedPhase.LIST].missing) == (SMALL, 0)
    assert (rows[SharedPhase.LISTING].entries, rows[SharedPhase.LISTING].missing) == (LISTED, 0)
    assert rows[SharedPhase.LISTING].createSeconds is not None
    fio = rows[SharedPhase.FIO]  # every pod's fio at once: their writes summed, fio's histograms merged
    assert fio.writeMiBps and fio.writeMiBps > 0 and fio.opsPerSecond and fio.operations
    assert sum(histograms_of(reports)["fio"].values()) == fio.operations
    for row in rows.values():
        assert row.latency is not None and 0 < row.latency.p50 <= row.latency.p99 <= row.latency.max * 1.01
    # The row's count is every pod's samples: the merged histogram holds them all.
    merged = histograms_of(reports)
    assert sum(merged["visibility"].values()) == FILES * (PODS - 1)
    assert sum(merged["lock"].values()) == PODS * ROUNDS


def test_each_attempt_works_in_a_folder_of_its_own_and_leaves_the_share_as_it_found_it(tmp_path: Path) -> None:
    (tmp_path / "csibench-shared-0").mkdir()  # an earlier attempt's leftovers, on a volume a backend kept
    (tmp_path / "csibench-shared-0" / "lock").write_text("00000000000000000042")
    ended = run_probes(tmp_path, pods=2, files=3, lock_rounds=3, small_files=5, list_files=7, attempt=2,
                       fio_seconds=0)
    assert [code for code, _ in ended] == [0, 0], ended
    assert sorted(p.name for p in tmp_path.iterdir()) == ["csibench-shared-0"]  # its own folder removed
    rows = {row.phase: row for row in build_rows(reports_of([log for _, log in ended]), 7, 0)}
    assert rows[SharedPhase.LOCK].lostUpdates == 0  # the old counter never met this attempt's


def test_a_pod_that_never_comes_is_named_by_the_others_and_fails_every_row(tmp_path: Path) -> None:
    started = subprocess.run([sys.executable, "-c", PROBE_SOURCE, "--pod=0", "--pods=3", f"--root={tmp_path}",
                              "--attempt=7", "--timeout=1"], capture_output=True, text=True, timeout=60)
    assert started.returncode == 1
    report = read_log("pod-0", "node-0", started.stdout)
    assert report.error == "pods 1, 2 of 3 never reached start (timed out after 1s)"
    rows = build_rows([report, PodReport("pod-1", None, error="Timeout: never Ready"),
                       PodReport("pod-2", None)], 10, 0)
    assert all(row.state == StepState.FAILED for row in rows)
    assert rows[0].message == "pod-0: pods 1, 2 of 3 never reached start (timed out after 1s)"


def _line(phase: str, **fields: Any) -> str:
    return probe.MARKER + json.dumps({"phase": phase, **fields})


def test_a_lost_update_and_a_missing_file_fail_their_rows_and_a_failed_pod_fails_only_what_it_did_not_report() \
        -> None:
    bins = {"1000": 2}
    one = "\n".join([_line("lock", ops=2, seconds=0.5, bins=bins, maxNs=1000),
                     _line("lock-counter", pod=0, counter=3),
                     _line("stat", ops=2, seconds=0.5, bins=bins, maxNs=1000, missing=1),
                     "fio: something else in the log", probe.MARKER + "{cut sho"])
    two = "\n".join([_line("lock", ops=2, seconds=1.0, bins=bins, maxNs=1000),
                     _line("stat", ops=2, seconds=1.0, bins=bins, maxNs=1000, missing=0),
                     _line("failed", error="OSError: [Errno 28] No space left on device: '/shared/f/1/7'")])
    rows = {row.phase: row for row in build_rows([read_log("a", "n1", one), read_log("b", "n2", two)], 0, 0)}
    assert SharedPhase.LISTING not in rows  # listFiles 0: no listing row
    lock = rows[SharedPhase.LOCK]
    assert (lock.state, lock.lostUpdates, lock.opsPerSecond) == (StepState.FAILED, 1, 4.0)  # 4 ops, slowest 1 s
    assert lock.message is not None and "1 of 4 increments under flock were lost" in lock.message
    stat = rows[SharedPhase.STAT]
    assert (stat.state, stat.missing) == (StepState.FAILED, 1)
    create = rows[SharedPhase.CREATE]
    assert create.state == StepState.FAILED  # neither reported it: the pod that said why is named
    assert create.message == "b: OSError: [Errno 28] No space left on device: '/shared/f/1/7'"


class Clocked(probe.Probe):
    """A probe that notes, on this process's one clock, when it left each phase's first barrier and when its work
    in the phase ended (it reaches the second barrier)."""

    def __init__(self, options: Any, marks: dict[tuple[str, int], list[float]], lines: list[dict[str, Any]]) -> None:
        super().__init__(options)
        self.marks, self.lines = marks, lines

    def barrier(self, phase: str) -> None:
        if phase.endswith("-done"):
            self.marks.setdefault((phase.removesuffix("-done"), 1), []).append(time.monotonic())
        super().barrier(phase)
        self.marks.setdefault((phase, 0), []).append(time.monotonic())

    def emit(self, phase: str, **fields: object) -> None:
        self.lines.append({"phase": phase, **fields})


def test_a_phases_time_covers_it_on_every_pod_however_spread_their_starts_were(tmp_path: Path) -> None:
    """Pods leave a barrier each at its own poll, 50 ms apart at worst here: the slowest pod's seconds still cover
    the phase from the first pod's start to the last pod's end, so the rate over them is never inflated."""
    marks: dict[tuple[str, int], list[float]] = {}
    lines: list[dict[str, Any]] = []
    threads = [threading.Thread(target=Clocked(probe.parse([
        f"--pod={i}", "--pods=4", f"--root={tmp_path}", "--attempt=1", "--poll-ms=50", "--files=2",
        "--lock-rounds=20", "--small-files=20", "--list-files=30", "--fio-seconds=1", "--fio-bytes=1048576",
        "--timeout=60"]), marks, lines).run)
        for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for phase in ("lock", "create", "stat", "list", "delete", "listing", "fio"):
        slowest = max(float(line["seconds"]) for line in lines if line["phase"] == phase)
        span = max(marks[(phase, 1)]) - min(marks[(phase, 0)])
        assert slowest >= span, (phase, slowest, span)


def test_numbers_no_probe_prints_are_not_taken_for_measurements() -> None:
    hostile = "\n".join([
        _line("create", ops=-100, seconds=float("nan"), bins={"1000": 3, str(10**400): 1}, maxNs=10**400),
        _line("stat", ops=True, seconds=1e400, bins={"1000": 1}, maxNs=5000, missing=-7),
        _line("lock", ops=4, seconds=1.0, bins={"1000": 4}, maxNs=1000),
        _line("lock-counter", pod=1, counter=True)])
    rows = {row.phase: row for row in build_rows([read_log("a", "n", hostile)], 0, 0)}
    create = rows[SharedPhase.CREATE]
    assert (create.operations, create.durationSeconds, create.opsPerSecond) == (0, 0.0, None)
    assert create.latency is not None and create.latency.max == 0.0  # an absurd maximum is no maximum
    stat = rows[SharedPhase.STAT]
    assert (stat.operations, stat.missing, stat.durationSeconds) == (0, 0, 0.0)
    assert rows[SharedPhase.LOCK].lostUpdates is None  # a counter from a pod other than 0 is not the counter
    SharedRow.model_validate_json(create.model_dump_json())  # finite, so status takes it


def test_the_default_timeout_grows_with_what_the_spec_asks_and_the_probe_has_at_least_a_second() -> None:
    small = step_context(shared_spec())
    slow = step_context(spec(steps=["sharedVolume"], shared={"files": 100_000, "pollMilliseconds": 1000}))
    assert shared_step.timeout_of(slow) >= 100_000 * 2 + shared_step.timeout_of(small) - 600
    tiny = step_context(spec(steps=["sharedVolume"], shared={}, timeouts={"sharedVolume": 1}))
    assert shared_step.timeout_of(tiny) == 1 and shared_step.probe_timeout(1) == 1
    assert "--timeout=1" in build_probe_command(tiny, 0)


def step_context(run_spec: BenchmarkRunSpec) -> StepContext:
    return StepContext(run_spec, NAMES, {}, "ns", "Immediate", Observed("ns", "r"), {})


def shared_spec(**more: Any) -> BenchmarkRunSpec:
    return spec(steps=["sharedVolume"], shared={"pods": PODS, "files": FILES, "lockRounds": ROUNDS,
                                                 "smallFiles": SMALL, "listFiles": LISTED, "fioSeconds": FIO,
                                                 "fioSize": "4Mi"}, **more)


@pytest.fixture
def probe_pods(probe_logs: list[str]) -> Iterator[Any]:
    yield probe_workload(probe_logs)


def test_the_step_mounts_one_rwx_claim_in_pods_spread_over_nodes_and_leaves_nothing(probe_pods: Any) -> None:
    fake = FakeKube(Behaviour(workload=probe_pods))
    status = run(fake, shared_spec())
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    step = status.steps[0]
    assert (step.name, step.objects, step.succeeded) == ("sharedVolume", PODS, PODS)
    assert [row.phase for row in status.shared] == list(SharedPhase)
    assert all(row.state == StepState.SUCCEEDED for row in status.shared)
    claims = [body for path, body in fake.created if path.endswith("/persistentvolumeclaims")]
    assert len(claims) == 1 and claims[0]["metadata"]["name"] == NAMES.shared_volume(0)
    assert claims[0]["spec"]["accessModes"] == ["ReadWriteMany"] and claims[0]["spec"]["volumeMode"] == "Filesystem"
    pods = [body for path, body in fake.created if path.endswith("/pods")]
    assert [p["metadata"]["name"] for p in pods] == [NAMES.shared_pod(i) for i in range(PODS)]
    for index, pod in enumerate(pods):
        assert pod["spec"]["volumes"] == [{"name": "shared", "persistentVolumeClaim": {
            "claimName": NAMES.shared_volume(0)}}]
        command = pod["spec"]["containers"][0]["command"]
        assert command[:3] == ["python3", "-c", PROBE_SOURCE] and f"--pod={index}" in command
        apart = pod["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
        assert apart["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
        assert apart["podAffinityTerm"]["labelSelector"]["matchLabels"] == pod["metadata"]["labels"]
    assert owned_left(fake) == []


def test_a_claim_that_does_not_bind_fails_the_step_with_the_provisioners_words_and_makes_no_pod() -> None:
    fake = FakeKube(Behaviour(provisioning_fails={NAMES.shared_volume(0)}))
    status = run(fake, shared_spec())
    assert status.phase is not None and status.phase.value == "Failed"
    assert all(row.state == StepState.FAILED for row in status.shared)
    assert status.shared[0].message is not None and "did not bind" in status.shared[0].message
    assert not [path for path, _ in fake.created if path.endswith("/pods")]
    assert owned_left(fake) == []


def test_the_report_table_and_the_comparison(probe_logs: list[str]) -> None:
    rows = [row.model_dump(mode="json", exclude_none=True) for row in build_rows(reports_of(probe_logs), LISTED, FIO)]
    run_a = {"status": {"shared": rows}}
    headers, table = shared_report.table(run_a) or ([], [])
    assert headers[0] == "Phase" and [line[0] for line in table] == [p.value for p in SharedPhase]
    lock = table[1]
    assert lock[1] == f"{PODS}/{PODS}" and lock[2] == str(PODS * ROUNDS) and lock[8] == "0 lost updates"
    faster = json.loads(json.dumps(rows))
    faster[2]["opsPerSecond"] = rows[2]["opsPerSecond"] * 2
    _, compared = shared_report.compare_table(run_a, {"status": {"shared": faster}}) or ([], [])
    assert compared[2][3] == "2.00×"
    assert shared_report.table({"status": {}}) is None


@pytest.mark.parametrize(("shared", "words"), [
    ({"pods": 1}, "greater than or equal to 2"),
    ({"pods": 17}, "less than or equal to 16"),
    ({"size": "0"}, "greater than 0"),
    ({"listFiles": -1}, "greater than or equal to 0"),
    ({"nodeSelector": {"bad key!": "x"}}, "nodeSelector"),
    ({"pods": 16, "smallFiles": 1_000_000, "fileBytes": 1_048_576}, "more than shared.size 1Gi"),
])
def test_admission_refuses_what_the_probe_cannot_run(shared: dict[str, Any], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        spec(steps=["sharedVolume"], shared=shared)
