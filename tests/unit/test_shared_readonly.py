"""The sharedVolume step on a ReadOnlyMany volume: one pod fills a ReadWriteOnce claim, which is cloned into the
ReadOnlyMany claim the readers mount read-only; the readers start at one instant (the start barrier's file) and
read: fio and the listing. The probe run for real (the filler on a directory, the readers on a copy of it, as on
a clone), its logs read back into rows, and the step against the in-memory API server."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from csibench.api.models import BenchmarkRunSpec, SharedPhase, StepState
from csibench.engine import barrier
from csibench.engine.steps.shared.entry import PROBE_SOURCE
from csibench.engine.steps.shared.rows import LISTING_CREATE, POPULATE, build_rows, read_log
from csibench.report import shared as shared_report
from tests.support.fake_kube import Behaviour, FakeKube
from tests.support.fake_runs import NAMES, owned_left, run, spec
from tests.support.shared_probe import probe_workload

PODS, LISTED, FIO = 3, 200, 3  # 3 s of fio: a start 0.3 s late under a busy machine still counts as together


def _probe(root: Path, mode: str, pod: int, *more: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", PROBE_SOURCE, f"--mode={mode}", f"--pod={pod}",
                             f"--pods={PODS}", f"--root={root}", "--attempt=7", f"--list-files={LISTED}",
                             f"--fio-seconds={FIO}", f"--fio-bytes={4 << 20}", "--timeout=60", *more],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _tree(root: Path) -> dict[str, str]:
    return {str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
            for path in sorted(root.rglob("*"))}


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[str]]:
    """The filler's log and the readers' logs, as the pods would print them."""
    seed, clone = tmp_path_factory.mktemp("seed"), tmp_path_factory.mktemp("work") / "clone"
    filler = _probe(seed, "populate", 0)
    assert filler.wait(timeout=120) == 0
    filled = filler.communicate()[0]
    shutil.copytree(seed, clone)  # the clone: the seed's data, what the readers see
    before = _tree(clone)
    start = tmp_path_factory.mktemp("barrier") / "start"
    start.write_text(str(int(time.time()) + 2))
    readers = [_probe(clone, "read", i, f"--start-file={start}") for i in range(PODS)]
    ended = [(process.wait(timeout=120), process.communicate()[0]) for process in readers]
    assert [code for code, _ in ended] == [0] * PODS, [log for _, log in ended]
    assert _tree(clone) == before  # the readers wrote nothing
    return filled, [log for _, log in ended]


def test_the_filler_makes_the_listing_and_a_file_per_reader_and_the_readers_read_them_at_once(
        logs: tuple[str, list[str]]) -> None:
    filled, read = logs
    report = read_log("filler", None, filled)
    assert report.error is None and POPULATE in report.phases and report.phases[LISTING_CREATE]["ops"] == LISTED
    readers = [read_log(f"pod-{i}", f"node-{i}", log) for i, log in enumerate(read)]
    rows = {row.phase: row for row in build_rows(readers, LISTED, FIO, read_only=True,
                                                 created=report.phases[LISTING_CREATE])}
    assert list(rows) == [SharedPhase.FIO, SharedPhase.LISTING]
    assert all((row.pods, row.nodes) == (PODS, PODS) for row in rows.values()), rows
    fio = rows[SharedPhase.FIO]
    assert fio.readMiBps and fio.readMiBps > 0 and fio.writeMiBps is None and fio.latency is not None
    assert fio.startSkewSeconds is not None  # by fio's own clock
    # Three processes started at one instant: on a starved machine (CI's, with CPU burners) one may start its fio
    # late, and then the row fails by the skew rule, which the synthetic test below holds exactly.
    assert fio.state == StepState.SUCCEEDED or (fio.skewed and "did not read together" in (fio.message or "")), fio
    listing = rows[SharedPhase.LISTING]
    assert listing.state == StepState.SUCCEEDED, listing
    assert (listing.entries, listing.missing) == (LISTED, 0) and listing.createSeconds is not None
    assert listing.startSkewSeconds is not None
    headers, table = shared_report.table({"status": {"shared": [r.model_dump(mode="json", exclude_none=True)
                                                                for r in rows.values()]}}) or ([], [])
    assert headers and table[0][0] == "fio (reads)" and table[0][4].endswith("MiB/s")


def readonly_spec(**shared: Any) -> BenchmarkRunSpec:
    return spec(steps=["sharedVolume"], shared={"accessMode": "ReadOnlyMany", "pods": PODS, "listFiles": LISTED,
                                                 "fioSeconds": FIO, "fioSize": "4Mi", **shared})


@pytest.fixture
def probe_pods(logs: tuple[str, list[str]]) -> Iterator[Any]:
    yield probe_workload(logs[1], logs[0])


def test_the_step_fills_a_claim_clones_it_read_only_and_its_readers_mount_the_clone(probe_pods: Any) -> None:
    fake = FakeKube(Behaviour(workload=probe_pods))
    status = run(fake, readonly_spec())
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    step = status.steps[0]
    assert (step.objects, step.succeeded) == (PODS + 1, PODS + 1)  # the readers and the filler
    assert [row.phase for row in status.shared] == [SharedPhase.FIO, SharedPhase.LISTING]
    assert status.shared[1].createSeconds is not None  # the filler's time to make the listing's files
    claims = [body for path, body in fake.created if path.endswith("/persistentvolumeclaims")]
    seed, clone = claims
    assert seed["metadata"]["name"] == NAMES.shared_volume(0) and seed["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert clone["spec"]["accessModes"] == ["ReadOnlyMany"]
    assert clone["spec"]["dataSource"] == {"kind": "PersistentVolumeClaim", "name": NAMES.shared_volume(0)}
    pods = [body for path, body in fake.created if path.endswith("/pods")]
    filler, *readers = pods
    assert filler["metadata"]["name"] == NAMES.shared_pod(PODS)
    assert "--mode=populate" in filler["spec"]["containers"][0]["command"]
    assert filler["spec"]["volumes"] == [{"name": "shared", "persistentVolumeClaim": {
        "claimName": NAMES.shared_volume(0)}}]
    assert [p["metadata"]["name"] for p in readers] == [NAMES.shared_pod(i) for i in range(PODS)]
    for reader in readers:
        volumes = {v["name"]: v for v in reader["spec"]["volumes"]}
        assert volumes["shared"]["persistentVolumeClaim"] == {"claimName": NAMES.shared_volume(1), "readOnly": True}
        mounts = {m["name"]: m for m in reader["spec"]["containers"][0]["volumeMounts"]}
        assert mounts["shared"]["readOnly"] is True and barrier.VOLUME in volumes
        assert "--mode=read" in reader["spec"]["containers"][0]["command"]
    started = {name for name, body in fake.pod_patches
               if barrier.START_ANNOTATION in ((body.get("metadata") or {}).get("annotations") or {})}
    assert started == {NAMES.shared_pod(i) for i in range(PODS)}  # the readers got a start time, not the filler
    assert owned_left(fake) == []


def test_a_clone_that_does_not_bind_fails_the_step_makes_no_reader_and_leaves_nothing(probe_pods: Any) -> None:
    fake = FakeKube(Behaviour(workload=probe_pods, provisioning_fails={NAMES.shared_volume(1)}))
    status = run(fake, readonly_spec())
    assert status.phase is not None and status.phase.value == "Failed"
    assert all(row.state == StepState.FAILED for row in status.shared)
    assert "did not bind" in (status.shared[0].message or "")
    pods = [body["metadata"]["name"] for path, body in fake.created if path.endswith("/pods")]
    assert pods == [NAMES.shared_pod(PODS)]  # the filler only
    assert owned_left(fake) == []


def test_a_filler_that_fails_fails_the_step_in_its_words_and_makes_no_clone() -> None:
    def workload(pod: dict[str, Any]) -> tuple[int, str]:
        return 1, 'CSIBENCH-SHARED {"phase": "failed", "pod": 0, "error": "OSError: [Errno 28] No space left"}'

    fake = FakeKube(Behaviour(workload=workload))
    status = run(fake, readonly_spec())
    assert status.phase is not None and status.phase.value == "Failed"
    assert "No space left" in (status.shared[0].message or "")
    claims = [body for path, body in fake.created if path.endswith("/persistentvolumeclaims")]
    assert len(claims) == 1 and owned_left(fake) == []


def test_a_read_only_volume_needs_something_to_read() -> None:
    with pytest.raises(ValidationError, match="listFiles or fioSeconds"):
        readonly_spec(listFiles=0, fioSeconds=0)


def _reader_line(pod: int, start_ms: int, seconds: float = 1.0) -> str:
    fields = {"pod": pod, "phase": "fio", "direction": "read", "ops": 100, "bytesPerSecond": 100 << 20, "iops": 100,
              "bins": {"1000000": 100}, "maxNs": 1_000_000, "seconds": seconds, "startMs": start_ms,
              "endMs": start_ms + int(seconds * 1000)}
    return "CSIBENCH-SHARED " + json.dumps(fields)


def test_readers_that_did_not_read_together_fail_the_fio_row_instead_of_summing() -> None:
    at = 1_796_000_000_000
    together = [read_log(f"pod-{i}", f"node-{i}", _reader_line(i, at + 20 * i)) for i in range(PODS)]
    row = build_rows(together, 0, FIO, read_only=True)[0]
    assert row.state == StepState.SUCCEEDED and row.startSkewSeconds == 0.04 and row.togetherSeconds == 0.96
    apart = [read_log(f"pod-{i}", f"node-{i}", _reader_line(i, at + 1500 * i)) for i in range(PODS)]
    row = build_rows(apart, 0, FIO, read_only=True)[0]
    assert row.state == StepState.FAILED and row.skewed and row.togetherSeconds == 0
    assert "did not read together" in (row.message or "")


def test_compare_never_holds_readers_against_writers(logs: tuple[str, list[str]]) -> None:
    readers = [read_log(f"pod-{i}", f"node-{i}", log) for i, log in enumerate(logs[1])]
    read_rows = [r.model_dump(mode="json", exclude_none=True) for r in build_rows(readers, LISTED, FIO,
                                                                                   read_only=True)]
    write_row = {**read_rows[0], "writeMiBps": read_rows[0]["readMiBps"]}
    del write_row["readMiBps"]
    _, compared = shared_report.compare_table({"status": {"shared": [write_row]}},
                                              {"status": {"shared": read_rows}}) or ([], [])
    by_phase = {row[0]: row for row in compared}
    assert set(by_phase) == {"fio", "fio (reads)", "listing"} and by_phase["fio"][3] == "-"
