"""The database step against the in-memory API server, and its pure parts: the pod's script and environment, the
matrix, what pgbench's and PostgreSQL's output says (logs recorded from the real tools on Debian's PostgreSQL 15:
``tests/golden/pgbench-*.log``), status, metrics and reports."""

from __future__ import annotations

import re
import subprocess
from typing import Any

import pytest
from pydantic import ValidationError

from csibench.api.models import BenchmarkRunSpec, DatabaseRowKind, DatabaseSpec, PgbenchMode, StepState
from csibench.engine.steps.database import pgbench, script
from csibench.engine.steps.database.step import RESULTS, progress_of, timeout_of
from localcluster.launcher import REPO_ROOT
from tests.support.fake_kube import Behaviour, FakeKube, fake_fio
from tests.support.fake_runs import UID, kill_when, owned_left, resume, run, running, spec

GOLDEN = REPO_ROOT / "tests" / "golden"
MATRIX_LOG = (GOLDEN / "pgbench-matrix.log").read_text()  # scales [1], clients [1, 2], 2 s per run
DISK_FULL_LOG = (GOLDEN / "pgbench-disk-full.log").read_text()  # scale 10 on a 100 MB filesystem
# The pod's script with sharedBuffers "1kB" (the pattern admits it, PostgreSQL does not), run as captured.
SERVER_START_LOG = (GOLDEN / "pgbench-server-start.log").read_text()
SMALL = {"scales": [1], "clients": [1, 2], "durationSeconds": {"readOnly": 2, "readWrite": 2}, "pauseSeconds": 0,
         "phasePauseSeconds": 0}


def db_spec(**database: Any) -> BenchmarkRunSpec:
    return spec(steps=["database"], database={**SMALL, **database})


def test_defaults_are_real_life_and_the_matrix_runs_in_the_scripts_order() -> None:
    data = DatabaseSpec()
    assert data.durationSeconds.readOnly >= 120 and data.durationSeconds.readWrite == 60
    assert data.pauseSeconds > 0 and data.phasePauseSeconds > 0 and data.postgres.sharedBuffers == "128MB"
    assert data.postgres.synchronousCommit.value == "on" and data.postgres.checkpointTimeoutSeconds == 300
    rows = pgbench.matrix(DatabaseSpec(scales=[10, 100], clients=[4, 8]))
    assert [(r.kind.value, r.scale, r.mode.value if r.mode else None, r.clients) for r in rows[:6]] == [
        ("initialize", 10, None, None), ("run", 10, "readOnly", 4), ("run", 10, "readOnly", 8),
        ("run", 10, "readWrite", 4), ("run", 10, "readWrite", 8), ("initialize", 100, None, None)]
    assert len(rows) == 10


def test_the_script_is_valid_posix_sh_and_takes_everything_from_its_environment() -> None:
    checked = subprocess.run(["sh", "-n", "-c", script.SCRIPT], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    assert script.build_command() == ["/bin/sh", "-c", script.SCRIPT]
    assert "pg_ctl" not in script.SCRIPT  # pg_ctl detaches the server from the pod's process group
    env = script.build_env(DatabaseSpec(scales=[1, 10], modes=[PgbenchMode.READ_WRITE], clients=[4, 64],
                                         postgres={"synchronousCommit": "off", "checkpointTimeoutSeconds": 60}))
    assert env["SCALES"] == "1 10" and env["MODES"] == "readWrite" and env["CLIENTS"] == "4 64"
    assert env["SYNCHRONOUS_COMMIT"] == "off" and env["CHECKPOINT_TIMEOUT"] == "60s"
    assert env["MAX_CONNECTIONS"] == "74" and "THREADS" not in env and env["PGDATA"] == "/data/pgdata"
    assert env["PATH"].startswith("/usr/lib/postgresql/15/bin:")
    assert script.build_env(DatabaseSpec(threads=2))["THREADS"] == "2"


def test_a_recorded_matrix_becomes_rows_with_tps_latency_and_wal() -> None:
    planned = pgbench.matrix(DatabaseSpec(**SMALL))
    rows, summaries = pgbench.build_rows(planned, MATRIX_LOG)
    assert [row.state for row in rows] == [StepState.SUCCEEDED] * 5
    init, ro1, ro2, rw1, rw2 = rows
    assert init.kind == DatabaseRowKind.INITIALIZE and init.durationSeconds == pytest.approx(0.308, abs=1e-3)
    assert init.tps is None
    for row in (ro1, ro2, rw1, rw2):
        assert row.tps is not None and row.tps > 0 and row.latencyAverageMs and row.latencyStddevMs is not None
        assert row.transactions and row.failedTransactions == 0 and row.durationSeconds == pytest.approx(2, abs=0.1)
    assert (ro1.walBytes, ro2.walBytes) == (0, 0) and rw1.walBytes == 434832 and (rw2.walBytes or 0) > 0
    assert (ro2.threads, rw2.clients) == (2, 2)
    assert "tps = " in summaries[1] and "progress:" not in summaries[1] and "postgres[" not in summaries[1]


def test_a_log_cut_mid_row_shows_finished_rows_and_the_one_running() -> None:
    planned = pgbench.matrix(DatabaseSpec(**SMALL))
    started = MATRIX_LOG.index("\n", MATRIX_LOG.index('"row":3,')) + 1
    cut = MATRIX_LOG[:started + 30]  # row 3 started, its end line not written yet
    rows, _ = pgbench.build_rows(planned, cut)
    assert [row.state for row in rows] == [StepState.SUCCEEDED] * 3 + [StepState.RUNNING, StepState.PENDING]
    assert progress_of(rows) == "2/4 runs"
    half_line = MATRIX_LOG[:MATRIX_LOG.index('"row":1,"kind":"run","scale":1,"mode":"readOnly","clients":1,"threads"')]
    assert pgbench.build_rows(planned, half_line)[0][1].state == StepState.RUNNING  # a half-written line waits
    initializing, _ = pgbench.build_rows(planned, MATRIX_LOG[:MATRIX_LOG.index("\n", MATRIX_LOG.index('"row":0')) + 1])
    assert progress_of(initializing) == "0/4 runs, initializing scale 1"


def test_a_full_disk_fails_the_initialization_with_postgresqls_words_and_the_rest_is_not_run() -> None:
    planned = pgbench.matrix(DatabaseSpec(**{**SMALL, "scales": [10], "clients": [1]}))
    rows, _ = pgbench.build_rows(planned, DISK_FULL_LOG)
    init = rows[0]
    assert init.state == StepState.FAILED and init.tps is None
    assert init.message is not None and init.message.startswith("pgbench -i failed (exit 1): PANIC: could not write")
    assert "No space left on device" in init.message and "pgbench: error: PQputline failed" in init.message
    pgbench.not_run(rows, "the pod ended before this row ran")
    assert all(row.state == StepState.FAILED and (row.message or "").startswith("not run: an earlier row failed")
               for row in rows[1:])


def test_setup_failures_and_tool_messages() -> None:
    planned = pgbench.matrix(DatabaseSpec(**SMALL))
    log = ('Data page checksums are disabled.\n\n'  # as initdb prints it: the error after its progress text
           'creating directory /data/pgdata ... initdb: error: could not create directory "/data/pgdata": '
           'Permission denied\n'
           'csibench-db {"event":"setup","stage":"initdb"}\n')
    rows, _ = pgbench.build_rows(planned, log)
    assert all(row.state == StepState.FAILED and row.message == pgbench.NOT_STARTED for row in rows)
    assert pgbench.startup_failure(pgbench.read_log(log)) == 'PostgreSQL did not start: initdb failed: initdb: ' \
        'error: could not create directory "/data/pgdata": Permission denied'
    messages = pgbench.messages_of(["postgres[1] LOG:  checkpoint starting", "postgres[2] FATAL:  too many clients",
                                    "pgbench: error: client 3 aborted in command 4", "postgres[2] PANIC:  x"])
    assert messages == "PANIC: x; FATAL: too many clients; pgbench: error: client 3 aborted in command 4"
    echoed = pgbench.messages_of(['postgres[7] ERROR:  could not extend file "base/5/1": No space left on device',
                                  'ERROR:  could not extend file "base/5/1": No space left on device',
                                  "pgbench: error: PQendcopy failed"])
    assert echoed == ('ERROR: could not extend file "base/5/1": No space left on device; '
                      "pgbench: error: PQendcopy failed")
    aborted = MATRIX_LOG.replace('"clients":2,"threads":2,"exit":0', '"clients":2,"threads":2,"exit":2', 1)
    failed = pgbench.build_rows(planned, aborted)[0][2]
    assert failed.state == StepState.FAILED and failed.tps is None and "exit 2" in (failed.message or "")


def test_admission_rules_in_the_models() -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"repeat": 2, "database": {}}, "repeat"),
        ({"steps": ["createVolume"], "database": {}}, "exactly when"),
        ({"database": {"scales": [1, 1]}}, "must not repeat"),
        ({"database": {"clients": [0]}}, "greater than or equal"),
        ({"database": {"postgres": {"sharedBuffers": "128M"}}}, "pattern"),
        ({"database": {"postgres": {"synchronousCommit": "sometimes"}}}, "synchronousCommit"),
        ({"database": {"size": "0"}}, "greater than 0"),
        ({"database": {"clients": list(range(1, 10))}}, "at most 8")]
    for bad, words in cases:
        with pytest.raises(ValidationError, match=words):
            BenchmarkRunSpec.model_validate({"storageClassName": "sim", **bad})


def test_the_default_timeout_covers_the_matrix_and_each_initialization() -> None:
    step_context: Any = type("C", (), {"spec": spec(steps=["database"], database={
        "scales": [10, 1000], "clients": [4], "durationSeconds": {"readOnly": 120, "readWrite": 60},
        "pauseSeconds": 30, "phasePauseSeconds": 60})})()
    runs = (120 + 30 + 60 + 30) * 1 + 2 * 60
    assert timeout_of(step_context) == 2 * (300 + runs) + 10 + 1000 + 300
    step_context.spec = spec(steps=["database"], database={}, timeouts={"database": 99})
    assert timeout_of(step_context) == 99


def pgbench_pod(pod: dict[str, Any]) -> tuple[int, str]:
    """The database pod as the fake's kubelet runs it: the recorded matrix (fio pods stay fio's)."""
    if pod["spec"]["containers"][0]["name"] != "postgres":
        return fake_fio(pod)
    return 0, MATRIX_LOG


def test_database_step_runs_its_own_claim_and_pod_and_leaves_nothing() -> None:
    fake = FakeKube(Behaviour(workload=pgbench_pod))
    status = run(fake, db_spec(size="64Mi"))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    step = next(s for s in status.steps if s.name == "database")
    assert (step.objects, step.succeeded, step.failed) == (1, 1, 0)
    assert [row.state for row in status.database] == [StepState.SUCCEEDED] * 5
    claims = [(verb, path) for verb, path in fake.timeline if "persistentvolumeclaims" in path]
    assert [verb for verb, _ in claims][:1] == ["POST"] and claims[-1][0] == "DELETE"
    pods = [path for verb, path in fake.timeline if verb == "POST" and "/pods/" in path]
    assert len(pods) == 1
    assert owned_left(fake) == []


def test_a_failed_initialization_fails_the_step_and_the_run_with_postgresqls_message() -> None:
    fake = FakeKube(Behaviour(workload=lambda pod: (1, DISK_FULL_LOG)))
    status = run(fake, db_spec(scales=[10], clients=[1]))
    assert status.phase is not None and status.phase.value == "Failed"
    step = next(s for s in status.steps if s.name == "database")
    assert step.failed == 1 and step.failureReasons[0].reason == "InitializationFailed"
    assert "No space left on device" in (status.message or "")
    assert status.database[0].state == StepState.FAILED and "No space left" in (status.database[0].message or "")
    assert all((row.message or "").startswith("not run") for row in status.database[1:])
    assert owned_left(fake) == []


def test_database_pod_meets_restricted_with_its_claim_and_an_empty_dir() -> None:
    from csibench.engine.catalog import STEPS
    from csibench.engine.naming import Names
    from csibench.engine.observed import Observed
    run_spec = db_spec(nodeSelector={"disk": "fast"})
    step = STEPS["database"]
    names = Names.for_run("bench", UID)
    context: Any = type("C", (), {"spec": run_spec, "names": names, "labels": {"csibench.io/run-uid": UID},
                                  "observed": Observed("ns", names.prefix)})()
    assert step.manifest is not None and step.companion is not None
    pod = step.manifest(context, 0)
    claim = step.companion.manifest(context, 0)
    assert pod["metadata"]["name"] == names.database_pod(0) and claim["metadata"]["name"] == names.database_volume(0)
    assert claim["spec"]["resources"]["requests"]["storage"] == "16Gi" and claim["spec"]["volumeMode"] == "Filesystem"
    assert claim["metadata"]["labels"]["csibench.io/run-uid"] == UID == pod["metadata"]["labels"]["csibench.io/run-uid"]
    security = pod["spec"]["securityContext"]
    assert security["runAsNonRoot"] and security["runAsUser"] == 65532 and security["fsGroup"] == 65532
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    container = pod["spec"]["containers"][0]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert {m["mountPath"] for m in container["volumeMounts"]} == {"/data", "/scratch"}
    assert {"name": "scratch", "emptyDir": {}} in pod["spec"]["volumes"]
    assert pod["spec"]["nodeSelector"] == {"disk": "fast"} and pod["spec"]["terminationGracePeriodSeconds"] == 30


def test_measured_rows_become_metrics_in_base_units_with_bounded_labels() -> None:
    from prometheus_client import generate_latest

    from csibench.metrics import METRICS
    rows, _ = pgbench.build_rows(pgbench.matrix(DatabaseSpec(**SMALL)), MATRIX_LOG)
    RESULTS.record_metrics("runs/db", rows)
    text = generate_latest().decode()
    line = next(line for line in text.splitlines() if line.startswith(
        'csibench_database_transactions_per_second{clients="2",mode="readWrite",run="runs/db",scale="1"}'))
    assert float(line.split()[-1]) == rows[4].tps
    latency = next(line for line in text.splitlines() if line.startswith(
        'csibench_database_latency_average_seconds{clients="1",mode="readOnly"'))
    assert float(latency.split()[-1]) == pytest.approx((rows[1].latencyAverageMs or 0) / 1000)
    assert 'csibench_database_wal_bytes{clients="1",mode="readWrite",run="runs/db",scale="1"} 434832.0' in text
    assert 'csibench_database_initialize_seconds{run="runs/db",scale="1"}' in text
    METRICS.forget_run("runs/db")
    assert 'run="runs/db"' not in generate_latest().decode()


def test_restart_policy_fail_marks_the_row_under_way_interrupted_without_numbers() -> None:
    run_spec = spec(steps=["database"], database=SMALL, restartPolicy="Fail")
    done = {"kind": "run", "scale": 1, "mode": "readOnly", "clients": 1, "state": "Succeeded", "tps": 100.0,
            "walBytes": 0}
    half = {**done, "clients": 2, "state": "Running", "tps": 50.0}
    previous = {"phase": "Running", "targetNamespace": "csibench-bench-0a1b2",
                "steps": [{"name": "database", "state": "Running", "objects": 1}],
                "database": [{"kind": "initialize", "scale": 1, "state": "Succeeded", "durationSeconds": 1.0}, done,
                             half, {"kind": "run", "scale": 1, "mode": "readWrite", "clients": 1}]}
    status = run(FakeKube(), run_spec, previous)
    assert status.phase is not None and status.phase.value == "Failed"
    assert status.database[1].state == StepState.SUCCEEDED and status.database[1].tps == 100.0
    assert status.database[2].state == StepState.INTERRUPTED and status.database[2].tps is None
    assert status.database[3].state == StepState.PENDING


def _as_run(status: Any, run_spec: BenchmarkRunSpec, name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "runs"}, "spec": run_spec.model_dump(mode="json"),
            "status": status.model_dump(mode="json", exclude_none=True)}


def test_report_has_a_table_shaped_like_the_published_one_and_compare_puts_tps_side_by_side() -> None:
    from csibench.report.compare import render_compare
    from csibench.report.render import render_markdown, render_table
    run_spec = db_spec()
    base = _as_run(run(FakeKube(Behaviour(workload=pgbench_pod)), run_spec), run_spec, "base")
    doubled = re.sub(r"^tps = ([0-9.]+)", lambda m: f"tps = {float(m.group(1)) * 2}", MATRIX_LOG, flags=re.M)
    other = _as_run(run(FakeKube(Behaviour(workload=lambda pod: (0, doubled))), run_spec), run_spec, "fast")
    text = render_table(base)
    assert "Database (pgbench)" in text
    header = next(line for line in text.splitlines() if line.startswith("Scale"))
    assert all(word in header for word in ("Type", "Clients", "Duration (s)", "TPS", "WAL Gen (MiB)"))
    init = next(line for line in text.splitlines() if line.split()[:2] == ["1", "init"])
    assert " 0.3 " in init
    ro = next(line for line in text.splitlines() if line.split()[:3] == ["1", "RO", "2"])
    assert "0.00" in ro  # readOnly: no WAL
    assert "Database (pgbench)" in render_markdown(base)
    compared = render_compare(base, other)
    assert "Database (pgbench), B vs A TPS per row:" in compared
    assert rows_line(compared, "1 RW 1").rstrip().endswith("×")
    assert rows_line(compared, "1 init").rstrip().endswith("1.00×")
    from csibench.report.html import build_compare_html, build_run_html
    page = build_run_html(base, None)  # the HTML report has the same table
    assert "<h2>Database (pgbench)</h2>" in page and "<th>WAL Gen (MiB)</th>" in page
    assert "<h2>Database (pgbench)</h2>" in build_compare_html(base, None, other, None)


def rows_line(text: str, prefix: str) -> str:
    return next(line for line in text.splitlines() if " ".join(line.split()).startswith(prefix))


def test_the_example_is_shaped_like_the_published_table_and_valid() -> None:
    import yaml
    example = yaml.safe_load((REPO_ROOT / "examples" / "database.yaml").read_text())
    run_spec = BenchmarkRunSpec.model_validate(example["spec"])
    assert run_spec.database is not None and run_spec.database.modes == [PgbenchMode.READ_ONLY,
                                                                         PgbenchMode.READ_WRITE]
    assert len(run_spec.database.scales) == 2 and len(run_spec.database.clients) >= 2


def test_an_operator_restart_mid_step_deletes_the_pod_and_its_claim_and_measures_again() -> None:
    fake = FakeKube(Behaviour(workload=pgbench_pod, bind_delay=0.05, ready_delay=0.6, release_delay=0.05))
    run_spec = db_spec()
    previous = kill_when(fake, run_spec, running("database"), extra_sleep=0.3)
    claims = [key for key in fake.objects if key[0] == "persistentvolumeclaims"]
    assert claims and [key for key in fake.objects if key[0] == "pods"]  # killed with both in place
    status = resume(fake, run_spec, previous)
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    redone = next(s for s in status.steps if s.name == "database")
    assert redone.attempts == 2 and redone.restored and "deleted 1 claims" in redone.restored
    assert [row.state for row in status.database] == [StepState.SUCCEEDED] * 5
    assert owned_left(fake) == []


def test_a_server_that_does_not_start_fails_the_step_with_its_own_reason_before_any_row() -> None:
    planned = pgbench.matrix(DatabaseSpec(**SMALL))
    rows, _ = pgbench.build_rows(planned, SERVER_START_LOG)
    assert all(row.state == StepState.FAILED and row.message == pgbench.NOT_STARTED for row in rows)
    assert pgbench.startup_failure(pgbench.read_log(SERVER_START_LOG)) == (
        'PostgreSQL did not start: FATAL: 0 8kB is outside the valid range for parameter "shared_buffers" '
        "(16 .. 1073741823)")
    fake = FakeKube(Behaviour(workload=lambda pod: (1, SERVER_START_LOG)))
    status = run(fake, db_spec(postgres={"sharedBuffers": "1kB"}))
    step = next(s for s in status.steps if s.name == "database")
    assert [(r.reason, r.count) for r in step.failureReasons] == [("ServerFailedToStart", 1)]
    assert "InitializationFailed" not in (status.message or "") and "shared_buffers" in (status.message or "")
    assert all(row.message == pgbench.NOT_STARTED for row in status.database)
    from csibench.report.render import render_table
    text = render_table(_as_run(status, db_spec(), "nostart"))
    assert "database (every row): not run: PostgreSQL did not start" in text
    assert "1× ServerFailedToStart: PostgreSQL did not start: FATAL: 0 8kB is outside" in text
    assert owned_left(fake) == []


def test_every_duration_reads_in_seconds_and_wal_in_mib() -> None:
    from csibench.report.database import table
    run_spec = db_spec()
    headers, rows = table(_as_run(run(FakeKube(Behaviour(workload=pgbench_pod)), run_spec), run_spec, "base")) or (
        [], [])
    assert "WAL Gen (MiB)" in headers and "WAL Gen (MB)" not in headers
    durations = [row[headers.index("Duration (s)")] for row in rows]
    assert durations[0] == "0.3" and all(re.fullmatch(r"\d+\.\d", cell) for cell in durations), durations
    rw1 = next(row for row in rows if row[:3] == ["1", "RW", "1"])
    assert rw1[headers.index("WAL Gen (MiB)")] == f"{434832 / 2**20:,.2f}"
