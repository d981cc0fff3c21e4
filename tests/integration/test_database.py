"""Issue 13's acceptance on the local cluster: the database step (Debian's PostgreSQL 15 and pgbench in a
process-mode pod, data directory on a PVC of the class, socket in an emptyDir) end to end — rows in status while
the step runs (seen by a watch), in the report, metrics and compare; a volume too small for the scale; the pod as
non-root in a "restricted" namespace; deleting the run mid-step. Durations stay small (10 s per run in the main
test, as the issue says; shorter elsewhere): these cores are shared."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from localcluster.kube import Kube, present, wait_until
from localcluster.launcher import LocalCluster
from localcluster.operator_process import OperatorProcess
from localcluster.runs import (
    GROUP,
    PLURAL,
    TERMINAL,
    VERSION,
    benchmark_run,
    create_run,
    get_run,
    read_report,
    step,
    wait_for_phase,
    wait_until_nothing_left,
)
from tests.support.cluster import StorageClassFactory, cli
from tests.support.hostcheck import host_mounts_under, processes_rooted_under
from tests.support.metrics import samples

pytestmark = pytest.mark.integration
QUICK = {"pauseSeconds": 0, "phasePauseSeconds": 0}


def assert_host_clean(cluster: LocalCluster) -> None:
    """No process of this cluster's containers (PostgreSQL's included) and no mount left on the host."""
    wait_until(lambda: not processes_rooted_under(cluster.config.state_dir), 60, "no container process left")
    assert host_mounts_under(cluster.config.state_dir) == []


def uids_of(processes: list[str]) -> set[str]:
    """The real uids of the listed processes ("pid: command") that are still there: a short-lived backend or
    PostgreSQL's startup process can end between the listing and the read."""
    uids = set()
    for process in processes:
        try:
            status = Path(f"/proc/{process.split(':')[0]}/status").read_text()
        except OSError:
            continue
        uids.add(next(line.split()[1] for line in status.splitlines() if line.startswith("Uid:")))
    return uids


class StatusWatch:
    """Every status the API server sends for one BenchmarkRun, collected by a watch in a thread."""

    def __init__(self, kube: Kube, namespace: str, name: str) -> None:
        self.statuses: list[dict[str, Any]] = []
        self.error: Exception | None = None
        self._stopped = False
        self._watch = watch.Watch()  # type: ignore[no-untyped-call]  # kubernetes' watch module is untyped
        self._thread = threading.Thread(target=self._run, args=(kube, namespace, name), daemon=True)
        self._thread.start()

    def _run(self, kube: Kube, namespace: str, name: str) -> None:
        try:
            for event in self._watch.stream(  # type: ignore[no-untyped-call]  # kubernetes' watch module is untyped
                    kube.custom.list_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL,
                    field_selector=f"metadata.name={name}", timeout_seconds=600):
                self.statuses.append(dict(event["object"].get("status") or {}))
        except Exception as error:  # the stream ends with the test (or the cluster): only an early end matters
            if not self._stopped:
                self.error = error

    def stop(self) -> None:
        self._stopped = True
        self._watch.stop()  # type: ignore[no-untyped-call]  # kubernetes' watch module is untyped


def test_database_matrix_succeeds_with_rows_seen_mid_step_and_everywhere_after(
        kube: Kube, namespace: str, cluster: LocalCluster, operator: OperatorProcess) -> None:
    database = {"scales": [1], "modes": ["readOnly", "readWrite"], "clients": [1, 4],
                # 5 s a run: four runs of fixed length were 40 s of a 32-minute command (10 s each until 2026-12-07)
                "durationSeconds": {"readOnly": 5, "readWrite": 5}, "size": "1Gi", **QUICK}
    seen = StatusWatch(kube, namespace, "db")
    create_run(kube, namespace, benchmark_run("db", storageClassName="csibench-sim", steps=["database"],
                                              database=database))

    def postgres_running() -> list[str]:
        """The server and its processes (they rename themselves "postgres: checkpointer", ...)."""
        found = [p for p in processes_rooted_under(cluster.config.state_dir) if p.split(": ", 1)[1].startswith(
            "postgres")]
        return found if any("checkpointer" in p for p in found) else []

    # While the step runs: PostgreSQL as the pod's non-root user, in the run's "restricted" namespace.
    wait_until(postgres_running, 120, "PostgreSQL running in the database pod", interval=0.3)
    pods = kube.core.list_pod_for_all_namespaces(label_selector="csibench.io/run=db").items
    pod = next(p for p in pods if present(present(p.metadata).namespace).startswith("csibench-db-"))
    pod_namespace = present(present(pod.metadata).namespace)
    labels = present(present(kube.core.read_namespace(pod_namespace).metadata).labels)
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    security = present(present(pod.spec).security_context)
    assert security.run_as_non_root and security.run_as_user == 65532 and security.fs_group == 65532
    uids = uids_of(postgres_running())
    assert uids == {"65532"}, uids  # every PostgreSQL process (server, backends, pgbench) runs as the pod's user

    run = wait_for_phase(kube, namespace, "db", TERMINAL, 300)
    seen.stop()
    assert seen.error is None, seen.error
    status = run["status"]
    assert status["phase"] == "Succeeded", (status.get("message"), operator.log()[-3000:])
    # The watch saw finished rows while the step was still running.
    mid = [s for s in seen.statuses if s.get("currentStep") == "database" and s.get("phase") == "Running"
           and any(r.get("state") == "Succeeded" for r in s.get("database") or [])
           and any(r.get("state") in ("Pending", "Running") for r in s.get("database") or [])]
    assert mid, [(s.get("progress"), [r.get("state") for r in s.get("database") or []]) for s in seen.statuses]
    assert any(s.get("progress", "").endswith("/4 runs") and not s["progress"].startswith("0/") for s in mid)

    rows = status["database"]
    assert [r["kind"] for r in rows] == ["initialize", "run", "run", "run", "run"]
    assert all(r["state"] == "Succeeded" for r in rows), rows
    runs = {(r["mode"], r["clients"]): r for r in rows[1:]}
    assert set(runs) == {("readOnly", 1), ("readOnly", 4), ("readWrite", 1), ("readWrite", 4)}
    for (mode, _clients), row in runs.items():
        assert row["tps"] > 0 and row["latencyAverageMs"] > 0 and row["durationSeconds"] >= 5, row
        assert row["failedTransactions"] == 0 and row["threads"] >= 1
        if mode == "readWrite":
            assert row["walBytes"] > 0, row
        else:
            assert row["walBytes"] < 64 * 1024, row  # near 0: a select-only run writes (next to) no WAL
    assert rows[0]["durationSeconds"] > 0 and step(run, "database")["succeeded"] == 1

    report = read_report(kube, run)
    record = next(s for s in report["steps"] if s["status"]["name"] == "database")
    assert record["extra"]["rows"] == rows
    assert "tps = " in record["extra"]["summaries"][1] and "databaseVolume" in report["manifests"]

    text = operator.scrape()
    label = f"{namespace}/db"
    tps = samples(text, "csibench_database_transactions_per_second", run=label, scale="1", mode="readWrite",
                  clients="4")
    assert tps and tps[0][1] == pytest.approx(runs[("readWrite", 4)]["tps"])
    wal = samples(text, "csibench_database_wal_bytes", run=label, mode="readWrite", clients="1")
    assert wal and wal[0][1] == runs[("readWrite", 1)]["walBytes"]
    assert samples(text, "csibench_database_initialize_seconds", run=label, scale="1")

    table = cli(cluster, "report", "db", "-n", namespace)
    print(table)  # the measured table, for the record (pytest -rP shows it)
    assert "Database (pgbench)" in table and "WAL Gen (MiB)" in table
    compared = cli(cluster, "compare", "db", "db", "-n", namespace)
    line = next(line for line in compared.splitlines() if line.split()[:3] == ["1", "RW", "4"])
    assert line.rstrip().endswith("1.00×")
    wait_until_nothing_left(kube, run, 60, "nothing of the run left")
    assert_host_clean(cluster)


def test_deleting_the_run_mid_step_stops_postgresql_and_removes_everything_and_bad_specs_are_refused(
        kube: Kube, namespace: str, cluster: LocalCluster, operator: OperatorProcess) -> None:
    database = {"scales": [1], "modes": ["readWrite"], "clients": [2], "durationSeconds": {"readWrite": 120},
                "size": "1Gi", **QUICK}
    create_run(kube, namespace, benchmark_run("gone", storageClassName="csibench-sim", steps=["database"],
                                              database=database))

    def run_row_running() -> bool:
        rows = ((get_run(kube, namespace, "gone") or {}).get("status") or {}).get("database") or []
        return len(rows) == 2 and rows[1].get("state") == "Running"

    # Meanwhile, admission refuses what the CRD can express (no run, no pod).
    refusals: list[tuple[dict[str, Any], str]] = [
        ({"repeat": 2, "database": {}}, "database cannot be combined with repeat"),
        ({"database": {"scales": [1, 1]}}, "Duplicate value"),
        ({"database": {"postgres": {"sharedBuffers": "1 GB"}}}, "sharedBuffers")]
    for bad, words in refusals:
        with pytest.raises(ApiException) as refused:
            create_run(kube, namespace, benchmark_run("refused", storageClassName="csibench-sim",
                                                      steps=["database"], **bad))
        assert refused.value.status == 422 and words in present(refused.value.body), refused.value.body
    wait_until(run_row_running, 120, "the readWrite run under way", interval=0.3)
    assert any(p.split(": ", 1)[1].startswith("postgres") for p in processes_rooted_under(cluster.config.state_dir))
    run = get_run(kube, namespace, "gone")
    assert run is not None
    kube.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "gone")
    wait_until(lambda: get_run(kube, namespace, "gone") is None, 120, "run deleted")
    wait_until_nothing_left(kube, run, 60, "nothing of the run left")
    assert_host_clean(cluster)


def test_a_volume_too_small_for_the_scale_fails_the_initialization_with_postgresqls_words(
        kube: Kube, namespace: str, cluster: LocalCluster, operator: OperatorProcess,
        storage_class: StorageClassFactory) -> None:
    sized = storage_class(**{"csi.storage.k8s.io/fstype": "ext4"})  # real filesystems of exactly the PVC's size
    database = {"scales": [10], "modes": ["readOnly"], "clients": [1], "durationSeconds": {"readOnly": 1},
                "size": "128Mi", **QUICK}  # scale 10 is ~160 MB of tables and indexes
    create_run(kube, namespace, benchmark_run("full", storageClassName=sized, steps=["database"], database=database))
    run = wait_for_phase(kube, namespace, "full", TERMINAL, 240)
    status = run["status"]
    assert (status["phase"], status["conditions"][0]["reason"]) == ("Failed", "ObjectsFailed"), status
    init, only_run = status["database"]
    assert init["state"] == "Failed" and "No space left on device" in init["message"], init
    assert init["message"].startswith("pgbench -i failed")
    print(init["message"])  # PostgreSQL's words, for the record (pytest -rP shows them)
    assert only_run["state"] == "Failed" and only_run["message"].startswith("not run"), only_run
    assert "No space left on device" in status["message"]
    assert step(run, "database")["failureReasons"][0]["reason"] == "InitializationFailed"
    wait_until_nothing_left(kube, run, 60, "nothing of the run left")
    assert_host_clean(cluster)
