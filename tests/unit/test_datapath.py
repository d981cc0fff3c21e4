"""The data-path step against the in-memory API server, and its pure parts: fio's command line and output, rows."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from csibench.api import histogram
from csibench.api.models import (
    BenchmarkRunSpec,
    DataPathRow,
    DataPathSpec,
    FailureReason,
    StepState,
    StepStatus,
    default_workloads,
)
from csibench.api.text import collapse_lines, shorten
from csibench.engine import barrier
from csibench.engine.errors import PlanError
from csibench.engine.fio_log import split_log
from csibench.engine.manifests import WorkloadMount, build_workload_pod
from csibench.engine.steps.datapath import checksum
from csibench.engine.steps.datapath.fio import (
    FSTYPE_PARAMETER,
    MIB,
    FioFailed,
    build_fio_command,
    files_that_do_not_fit,
    parse_fio_log,
    room_for_files,
)
from csibench.engine.steps.datapath.rows import build_row, row_histograms
from csibench.engine.steps.datapath.step import level_rates
from csibench.engine.verdict import failure_summary
from csibench.engine.workload import workload_image
from tests.support.fake_kube import Behaviour, FakeKube, fake_checksums, fake_fio
from tests.support.fake_runs import NAMES, REF, UID, owned_left, run, spec, stored_report

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
FIO_JSON = {"fio version": "fio-3.33", "jobs": [{
    "jobname": "seqRead", "error": 0, "job options": {"numjobs": "2"},
    "read": {"bw_bytes": 104857600, "iops": 1600.0, "clat_ns": {"percentile": {"50.000000": 500000,
                                                                               "99.000000": 2000000}}},
    "write": {"bw_bytes": 0, "iops": 0.0, "clat_ns": {"percentile": {}}}}]}


def data_spec(**data: Any) -> BenchmarkRunSpec:
    return spec(volumes=3, pvcsPerPod=1, size="64Mi", dataPath={"rampSeconds": 0, "runtimeSeconds": 1, **data})


def test_defaults_reproduce_the_published_table_at_a_small_scale() -> None:
    rows = [(w.name, w.pattern.value, w.blockSize) for w in default_workloads()]
    assert rows == [("seqRead", "read", "64Ki"), ("seqWrite", "write", "64Ki"), ("randRead", "randread", "8Ki"),
                    ("randWrite", "randwrite", "8Ki"), ("randReadWrite", "randrw", "8Ki")]
    data = DataPathSpec()
    assert data.direct and data.jobsPerVolume >= 1 and data.fileSize == "16Mi"


def test_fio_command_is_built_from_validated_fields_in_bytes() -> None:
    data = DataPathSpec(fileSize="4Mi", jobsPerVolume=3, iodepth=16, runtimeSeconds=2, rampSeconds=1)
    command = build_fio_command(data, default_workloads()[4])
    assert command[0] == "fio" and "--output-format=json+" in command and "--group_reporting" in command
    assert "--percentile_list=50:90:99:99.9" in command and "--status-interval=1" in command
    long = build_fio_command(DataPathSpec(runtimeSeconds=300, rampSeconds=100), default_workloads()[0])
    assert "--status-interval=40" in long  # about ten documents over ramp and runtime, each with its histograms
    assert {"--rw=randrw", "--rwmixread=50", "--bs=8192", "--size=4194304", "--numjobs=3", "--iodepth=16",
            "--direct=1", "--time_based", "--runtime=2", "--ramp_time=1", "--directory=/data"} <= set(command)
    # every row works on the same files, so the volume holds jobsPerVolume x fileSize, whatever the rows
    formats = {part for w in default_workloads() for part in build_fio_command(data, w) if "filename_format" in part}
    assert formats == {"--filename_format=csibench.$jobnum.$filenum"}


def test_one_pods_histogram_gives_back_fios_own_percentiles() -> None:
    """A real fio 3.33 log (randrw 8 KiB, 2 jobs, --output-format=json+ --percentile_list=50:90:99:99.9): the
    percentiles read from its bins are the ones fio printed, and its bins count every completion."""
    documents, _ = split_log((GOLDEN / "fio-randrw-json-plus.log").read_text())
    job = documents[-1]["jobs"][0]  # type: ignore[index]
    result = parse_fio_log((GOLDEN / "fio-randrw-json-plus.log").read_text())
    for direction, parsed in (("read", result.read), ("write", result.write)):
        clat = job[direction]["clat_ns"]
        assert sum(parsed.clat_bins.values()) == clat["N"] > 1000
        found = histogram.percentiles(parsed.clat_bins)
        assert {f"{p:.6f}": found[p] for p in histogram.PERCENTILES} == clat["percentile"]
        assert parsed.clat_max == clat["max"] / 1e9


def test_a_row_says_how_far_apart_its_pods_measured_and_the_report_flags_a_wide_spread() -> None:
    from csibench.report.datapath import notes
    log = (GOLDEN / "fio-randrw-json-plus.log").read_text()
    documents, _ = split_log(log)
    last = documents[-1]
    job = last["jobs"][0]  # type: ignore[index]
    runtime = max(job["read"]["runtime"], job["write"]["runtime"])
    assert parse_fio_log(log).window_ms == (last["timestamp_ms"] - runtime, last["timestamp_ms"])  # type: ignore[index]

    def measured(start_ms: int, end_ms: int) -> Any:
        document = json.loads(json.dumps(FIO_JSON))
        document["timestamp_ms"] = end_ms
        document["jobs"][0]["read"]["runtime"] = end_ms - start_ms
        return parse_fio_log(json.dumps(document))
    data = DataPathSpec(runtimeSeconds=10)
    together = build_row(data, default_workloads()[0], [measured(1000, 11000), measured(1400, 11500)], [], 12.0)
    assert (together.startSkewSeconds, together.togetherSeconds, together.skewed) == (0.4, 9.6, False)
    apart = build_row(data, default_workloads()[0], [measured(1000, 11000), measured(9000, 19000)], [], 20.0)
    assert (apart.startSkewSeconds, apart.togetherSeconds, apart.skewed) == (8.0, 2.0, True)
    edge = build_row(data, default_workloads()[0], [measured(1000, 11000), measured(2000, 12000)], [], 12.0)
    assert edge.skewed is False  # exactly 10% of the runtime is still together; more is not
    never = build_row(data, default_workloads()[0], [measured(0, 1000), measured(5000, 6000)], [], 7.0)
    assert never.togetherSeconds == 0.0
    run_of = {"spec": {"dataPath": {"runtimeSeconds": 10}}, "status": {"dataPath": [
        r.model_dump(mode="json", exclude_none=True) for r in (together, apart)]}}
    flagged = [line for line in notes(run_of) if "did not run together" in line]
    assert flagged == ["data path (seqRead): pods did not run together: their measured starts spread over 8.00s, "
                       "more than 10% of the 10s runtime, and all of them ran at once for 2.00s; the summed MiB/s "
                       "and IOPS overstate what the storage served at any one moment"]


def test_merged_percentiles_follow_fios_rule_at_its_edges() -> None:
    assert histogram.percentiles({}) == {p: None for p in histogram.PERCENTILES}
    # 1000 completions: 999 at 1 us, one at 5 us. fio compares the running count with 99.9 parsed as a double,
    # a hair above 99.9, so 999 of 1000 does not reach it and p99.9 is the slow one.
    found = histogram.percentiles({1000: 999, 5000: 1})
    assert (found[50.0], found[99.0], found[99.9]) == (1000, 1000, 5000)
    assert histogram.merge([{1000: 2}, {1000: 3, 2000: 1}, {}]) == {1000: 5, 2000: 1}
    assert histogram.from_json({"7": 2, "x": 1, "8": -1, "9": True}) == {7: 2}
    assert histogram.cumulative({2000: 1, 1000: 3}) == [(1000, 0.75), (2000, 1.0)]
    assert histogram.to_json({20: 1, 3: 2}) == {"3": 2, "20": 1}


def test_only_ascii_digits_are_histogram_bins() -> None:
    # issue 42 point 8: "²" passed str.isdigit and raised; Arabic-Indic digits were read as numbers
    assert histogram.from_json({"²": 1, "\u0661\u0662": 3, "\uff11": 4, "100": 2, " 5": 1, "+6": 1}) == {100: 2}


def test_fio_json_is_parsed_after_its_warnings_and_errors_keep_fios_words() -> None:
    log = "fio: this platform does not support process shared mutexes\n" + json.dumps(FIO_JSON, indent=2)
    result = parse_fio_log(log)
    assert result.read.bytes_per_second == 104857600 and result.read.iops == 1600.0
    assert (result.read.clat_p50, result.read.clat_p99) == (0.0005, 0.002) and result.write.clat_p50 is None
    assert result.jobs == 2
    with pytest.raises(FioFailed, match="engine nosuch not loadable"):
        parse_fio_log("fio: engine nosuch not loadable\nfio: failed to load engine\n")
    broken = dict(FIO_JSON, jobs=[dict(FIO_JSON["jobs"][0], error=28)])  # type: ignore[arg-type]
    with pytest.raises(FioFailed, match="No space left"):
        parse_fio_log("fio: io_u error on file /data/x: No space left on device: write offset=0\n"
                      + json.dumps(broken))


def _with_bins(document: dict[str, Any], bins: dict[str, int], largest: int) -> str:
    changed = json.loads(json.dumps(document))
    changed["jobs"][0]["read"]["clat_ns"].update(bins=bins, max=largest)
    return json.dumps(changed)


def test_row_sums_bandwidth_merges_the_pods_latency_histograms_and_shows_the_spread() -> None:
    data = DataPathSpec()
    # fast: 100 reads at 1 ms (its p99 1 ms); slow: 90 at 1 ms and 10 at 9 ms (its p99 9 ms). All 200 together:
    # 190 at 1 ms, 10 at 9 ms, so p90 and p50 are 1 ms, p99 9 ms; neither pod's percentiles, nor their max.
    fast = parse_fio_log(_with_bins(FIO_JSON, {"1000000": 100}, 1_002_000))
    slow_json = json.loads(json.dumps(FIO_JSON))
    slow_json["jobs"][0]["read"].update(bw_bytes=52428800, iops=800.0)
    slow = parse_fio_log(_with_bins(slow_json, {"1000000": 90, "9000000": 10}, 9_100_000))
    row = build_row(data, default_workloads()[0], [fast, slow], [], 3.5)
    assert row.state == StepState.SUCCEEDED and row.volumes == 2 and row.jobs == 2 * data.jobsPerVolume
    assert row.readMiBps == 150.0 and row.readIOPS == 2400.0 and row.writeMiBps == 0.0
    assert (row.minVolumeMiBps, row.maxVolumeMiBps) == (50.0, 100.0)
    assert row.latency is not None
    assert (row.latency.readP50, row.latency.readP90, row.latency.readP99, row.latency.readP999,
            row.latency.readMax) == (0.001, 0.001, 0.009, 0.009, 0.0091)
    assert row.latency.writeP99 is None and row.latency.writeMax is None
    # 5 of 200 slow (2.5%): p99 is still slow; with 1 of 200 (0.5%) it is not: the tail is weighed, not maxed.
    rare = parse_fio_log(_with_bins(slow_json, {"1000000": 99, "9000000": 1}, 9_100_000))
    merged = build_row(data, default_workloads()[0], [fast, rare], [], 1.0).latency
    assert merged is not None and (merged.readP99, merged.readP999) == (0.001, 0.009)
    failed = build_row(data, default_workloads()[0], [fast], [("PodFailed", "fio: engine x not loadable")], 1.0)
    assert failed.state == StepState.FAILED and failed.failed == 1 and "engine x not loadable" in (failed.message
                                                                                                   or "")


def test_workload_pods_meet_restricted_and_carry_the_run_labels() -> None:
    run_spec = data_spec()
    assert run_spec.dataPath is not None
    pod = build_workload_pod("p", "fio", "img:1", ["fio"], [WorkloadMount("data", "/data", "claim"),
                                                            WorkloadMount("scratch", "/scratch")],
                             {"csibench.io/run-uid": UID}, run_spec.dataPath.resources, {}, [])
    security = pod["spec"]["securityContext"]
    assert security["runAsNonRoot"] and security["runAsUser"] != 0 and security["fsGroup"]
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    container = pod["spec"]["containers"][0]["securityContext"]
    assert container["allowPrivilegeEscalation"] is False and container["capabilities"] == {"drop": ["ALL"]}
    assert pod["spec"]["restartPolicy"] == "Never" and pod["metadata"]["labels"]["csibench.io/run-uid"] == UID
    assert pod["spec"]["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "claim"}},
                                      {"name": "scratch", "emptyDir": {}}]


def test_admission_rules_in_the_models() -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"size": "16Mi", "dataPath": {"fileSize": "16Mi"}}, "must fit the volume"),
        ({"volumes": 2, "dataPath": {"volumes": 3}}, "at most volumes"),
        ({"steps": ["createVolume"], "dataPath": {}}, "steps must list dataPath exactly when spec.dataPath is set"),
        ({"dataPath": {"workloads": [{"name": "a", "pattern": "read", "blockSize": "4Ki"}] * 2}},
         "unique")]
    for bad, words in cases:
        with pytest.raises(ValidationError, match=words):
            BenchmarkRunSpec.model_validate({"storageClassName": "sim", **bad})


def test_workload_image_spec_over_operator_default_and_a_bad_default_is_a_plan_error() -> None:
    assert workload_image(DataPathSpec(image="example.com/fio:1").image) == "example.com/fio:1"
    assert workload_image(DataPathSpec().image, {"CSIBENCH_WORKLOAD_IMAGE": "r.example/w:2"}) == "r.example/w:2"
    with pytest.raises(PlanError):
        workload_image(DataPathSpec().image, {"CSIBENCH_WORKLOAD_IMAGE": "bad image; rm -rf"})


def test_data_path_runs_every_workload_on_every_volume_after_unpublish() -> None:
    fake = FakeKube()
    status = run(fake, data_spec())
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    names = [s.name for s in status.steps]
    assert names.index("dataPath") == names.index("unpublish") + 1
    step = next(s for s in status.steps if s.name == "dataPath")
    assert (step.objects, step.succeeded, step.failed) == (15, 15, 0)
    assert [row.name for row in status.dataPath] == ["seqRead", "seqWrite", "randRead", "randWrite",
                                                     "randReadWrite"]
    by_name = {row.name: row for row in status.dataPath}
    assert by_name["seqRead"].readMiBps == 300.0 and by_name["seqRead"].writeMiBps == 0.0
    assert by_name["seqWrite"].writeMiBps == 150.0 and by_name["seqWrite"].readMiBps == 0.0
    assert (by_name["randReadWrite"].readIOPS or 0) > 0 and (by_name["randReadWrite"].writeIOPS or 0) > 0
    assert all(row.state == StepState.SUCCEEDED and row.durationSeconds is not None for row in status.dataPath)
    # Each workload's pods are deleted before the next workload's are created.
    posts = [path for verb, path in fake.timeline if verb == "POST" and "/pods/" in path and "-d0" in path]
    deletes = [path for verb, path in fake.timeline if verb == "DELETE" and "-d000" in path]
    first_of_second = fake.timeline.index(("POST", posts[3]))
    assert all(fake.timeline.index(("DELETE", d)) < first_of_second for d in deletes[:3])
    assert owned_left(fake) == []


def test_every_pod_of_a_workload_starts_at_one_time_given_once_all_of_them_run() -> None:
    """The start barrier: each pod lays out its files in an init container, then waits for the start time its
    downwardAPI volume shows; the operator sets it on every pod of the workload (one value, recorded in the row)
    only after the last of them is Running. The fake's pods end only once they have it."""
    fake = FakeKube(Behaviour(start_delay=0.05))
    status = run(fake, data_spec(workloads=[{"name": "a", "pattern": "read", "blockSize": "4Ki"},
                                            {"name": "b", "pattern": "write", "blockSize": "4Ki"}]))
    assert status.phase == "Succeeded", status.message
    pods = {body["metadata"]["name"]: body for path, body in fake.created if path.endswith("/pods")
            and "csibench.io/workload" in body["metadata"]["labels"]}
    assert len(pods) == 6
    for body in pods.values():
        init = body["spec"]["initContainers"][0]
        assert init["name"] == barrier.LAYOUT_CONTAINER and init["command"][-1] == "--create_only=1"
        assert init["command"][:-1] == body["spec"]["containers"][0]["command"][4:]  # fio's own words, as "$@"
        assert body["spec"]["containers"][0]["command"][:4] == ["sh", "-c", barrier.WAIT_SCRIPT, "csibench-barrier"]
    for row in status.dataPath:
        names = [n for n, body in pods.items() if body["metadata"]["labels"]["csibench.io/workload"] == row.name]
        assert row.startAt is not None and row.skewed is None  # the fake's fio has no clock
        patches = [i for i, (what, name) in enumerate(fake.pod_events) if what == "patched" and name in names]
        running = [i for i, (what, name) in enumerate(fake.pod_events) if what == "running" and name in names]
        assert len(patches) == len(running) == 3 and max(running) < min(patches), fake.pod_events


class LateCreate(FakeKube):
    """An API server at which one pod's create takes 1.5 s (a webhook, a throttled client)."""

    def __init__(self, late: str) -> None:
        super().__init__()
        self.late = late

    async def create(self, path: str, body: Any, on_send: Any = None, dry_run: bool = False) -> bool:
        if body["metadata"].get("name") == self.late:
            await asyncio.sleep(1.5)
        return await super().create(path, body, on_send, dry_run)


def test_a_pod_created_after_the_barrier_released_gets_the_same_start_time_once_it_runs() -> None:
    """startTimeoutSeconds 1: the barrier gives the two pods that run a start time; the third, whose create was
    still under way, gets the same one once it runs, rather than waiting for the workload's timeout."""
    late = NAMES.data_pod(2)
    fake = LateCreate(late)
    run_spec = spec(volumes=3, pvcsPerPod=1, size="64Mi", timeouts={"dataPath": 15},  # without its start time
                    dataPath={"rampSeconds": 0, "runtimeSeconds": 1, "startTimeoutSeconds": 1,  # the late pod
                              "workloads": [{"name": "a", "pattern": "read", "blockSize": "4Ki"}]})  # fails then
    status = run(fake, run_spec)
    assert status.phase == "Succeeded", status.message
    row = status.dataPath[0]
    given = [(name, body["metadata"]["annotations"][barrier.START_ANNOTATION]) for name, body in fake.pod_patches]
    assert sorted(name for name, _ in given) == sorted(NAMES.data_pod(i) for i in range(3)), given
    assert {value for _, value in given} == {str(row.startAt)}
    assert given[-1][0] == late and ("running", late) in fake.pod_events


def test_a_failing_pod_fails_its_row_with_fios_message_and_the_matrix_goes_on() -> None:
    def workload(pod: dict[str, Any]) -> tuple[int, str]:
        if "--rw=write" in pod["spec"]["containers"][0]["command"]:
            return 1, "fio: engine nosuch not loadable\nfio: failed to load engine\n"
        return fake_fio(pod)
    fake = FakeKube(Behaviour(workload=workload))
    status = run(fake, data_spec())
    assert status.phase is not None and status.phase.value == "Failed"
    by_name = {row.name: row for row in status.dataPath}
    assert by_name["seqWrite"].state == StepState.FAILED and by_name["seqWrite"].failed == 3
    assert "engine nosuch not loadable" in (by_name["seqWrite"].message or "")
    assert by_name["seqWrite"].writeMiBps is None
    assert all(by_name[n].state == StepState.SUCCEEDED for n in ("seqRead", "randRead", "randWrite"))
    assert "engine nosuch not loadable" in (status.message or "")
    assert owned_left(fake) == []


def test_data_path_volumes_are_a_subset_and_default_steps_include_it() -> None:
    fake = FakeKube()
    status = run(fake, data_spec(volumes=2, workloads=[{"name": "w", "pattern": "randread", "blockSize": "4Ki"}]))
    step = next(s for s in status.steps if s.name == "dataPath")
    assert step.objects == 2 and status.dataPath[0].volumes == 2
    assert status.dataPath[0].readMiBps == pytest.approx(200 * 2**20 / MIB)


def _as_run(status: Any, run_spec: BenchmarkRunSpec, name: str = "bench") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "runs"}, "spec": run_spec.model_dump(mode="json"),
            "status": status.model_dump(mode="json", exclude_none=True)}


def test_report_has_a_second_table_shaped_like_the_published_one_and_compare_puts_workloads_side_by_side() -> None:
    from csibench.report.compare import render_compare
    from csibench.report.render import render_markdown, render_table
    run_spec = data_spec()
    base = _as_run(run(FakeKube(), run_spec), run_spec, "base")
    faster = _as_run(run(FakeKube(Behaviour(workload=lambda pod: fake_fio(pod, 200 * 2**20, 100 * 2**20))),
                         run_spec), run_spec, "fast")
    text = render_table(base)
    assert "Data path (fio)" in text
    line = next(line for line in text.splitlines() if line.startswith("Sequential read"))
    assert "64 KiB" in line and "100% read, sequential" in line and "300.0" in line
    assert "50% read / 50% write, random" in text
    assert "Data path (fio)" in render_markdown(base)
    compared = render_compare(base, faster)
    row = next(line for line in compared.splitlines() if line.startswith("Sequential write"))
    assert row.rstrip().endswith("2.00×")
    from csibench.report.html import build_compare_html, build_run_html
    page = build_run_html(base, None)  # the HTML report has the same table
    assert "<h2>Data path (fio)</h2>" in page and "100% read, sequential" in page and "300.0" in page
    assert "<td>2.00×</td>" in build_compare_html(base, None, faster, None)


def test_pods_spread_over_the_usable_nodes_and_each_row_says_per_node_what_they_did() -> None:
    from csibench.report.datapath import node_table
    run_spec = spec(volumes=4, pvcsPerPod=1, size="64Mi", dataPath={"rampSeconds": 0, "runtimeSeconds": 1})
    fake = FakeKube()  # three Ready nodes: node-0, node-1, node-2
    status = run(fake, run_spec)
    assert status.phase == "Succeeded", status.message
    pods = [body for path, body in fake.created if path.endswith("/pods")
            and "csibench.io/workload" in body["metadata"]["labels"]]
    preferred = {p["metadata"]["name"]: p["spec"]["affinity"]["nodeAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"][0]["preference"]["matchFields"][0]["values"][0]
                 for p in pods}
    assert sorted(preferred.values()).count("node-0") == 10 and set(preferred.values()) == {"node-0", "node-1",
                                                                                             "node-2"}
    for row in status.dataPath:
        assert [(n.node, n.volumes) for n in row.nodes] == [("node-0", 2), ("node-1", 1), ("node-2", 1)], row
        assert sum(n.readMiBps or 0 for n in row.nodes) == pytest.approx(row.readMiBps)
        assert sum(n.writeIOPS or 0 for n in row.nodes) == pytest.approx(row.writeIOPS)
        assert all((n.readP99 is None) == (row.latency is None or row.latency.readP99 is None) for n in row.nodes)
    headers, rows = node_table(_as_run(status, run_spec)) or ([], [])
    assert len(rows) == 3 * len(status.dataPath) and headers[:3] == ["Workload", "Node", "Volumes"]


def test_status_keeps_the_slowest_nodes_when_a_row_ran_on_more_than_it_holds() -> None:
    from csibench.engine.steps.datapath.fio import Direction, VolumeResult
    from csibench.engine.steps.datapath.rows import NODE_ROWS
    results = [VolumeResult(Direction(float(i + 1) * MIB, 1.0, None, None, {1000: 1}), Direction(0.0, 0.0, None, None),
                            1) for i in range(NODE_ROWS + 6)]
    nodes = [f"node-{i:03d}" for i in range(NODE_ROWS + 6)]  # node-i's one volume does i + 1 MiB/s
    row = build_row(DataPathSpec(), default_workloads()[0], results, [], 1.0, nodes)
    assert [n.node for n in row.nodes] == nodes[:NODE_ROWS] and row.readMiBps == sum(range(1, NODE_ROWS + 7))


def test_the_html_report_draws_each_workloads_merged_completion_latency() -> None:
    from csibench.report.datapath import merged_histograms
    from csibench.report.html import build_run_html
    run_spec = data_spec()
    fake = FakeKube()
    base = _as_run(run(fake, run_spec), run_spec, "base")
    report = stored_report(fake)
    record = next(s for s in report["steps"] if s["status"]["name"] == "dataPath")
    merged = merged_histograms(record)
    # fake fio: 98 completions at 250 us and 2 at 900 us per pod and direction; 3 pods merged
    assert merged["seqRead"] == {"read": {250000: 294, 900000: 6}}
    assert set(merged["randReadWrite"]) == {"read", "write"} and len(merged) == 5
    page = build_run_html(base, report)
    section = page[page.index("<h2>Data path: completion latency</h2>"):]
    assert section.count('<div class="plot completion"><svg') == 5 and "Sequential read: completion latency" in page
    assert section.count('<div class="plot completion-tail"><svg') == 5 and "n=300 I/Os" in section  # its tail beside
    assert build_run_html(base, None).count("completion latency") == 0  # drawn only from the stored histograms


def test_rate_levels_run_each_workload_again_at_a_share_of_its_unthrottled_iops() -> None:
    """rateLevels [25, 50]: each workload runs unthrottled, then at 25% and 50% of the IOPS it reached, fio
    --rate_iops per job (read and write each); the fake's fio holds its jobs to that rate, so each level achieves
    its target. The report has a table and a curve; the level pods' histograms stay out of the row's CDF."""
    from csibench.report.datapath import level_table, merged_histograms
    from csibench.report.html import build_run_html
    from csibench.report.render import render_table
    run_spec = data_spec(rateLevels=[25, 50], workloads=[
        {"name": "randRead", "pattern": "randread", "blockSize": "4Ki"},
        {"name": "mixed", "pattern": "randrw", "blockSize": "4Ki", "readPercent": 50}])
    fake = FakeKube()
    status = run(fake, run_spec)
    assert status.phase == "Succeeded", status.message
    step = next(s for s in status.steps if s.name == "dataPath")
    assert (step.objects, step.succeeded) == (2 * 3 * 3, 18)  # workloads x (unthrottled + 2 levels) x volumes
    pods = [body for path, body in fake.created if path.endswith("/pods")
            and "csibench.io/workload" in body["metadata"]["labels"]]
    rates = [next((a for a in body["spec"]["containers"][0]["command"] if a.startswith("--rate_iops=")), None)
             for body in pods]
    # fake fio: 100 MiB/s read and 50 MiB/s write per pod at 4 KiB, 25600 and 12800 IOPS; 3 pods x 2 jobs each
    assert rates[:9] == [None] * 3 + ["--rate_iops=3200,0"] * 3 + ["--rate_iops=6400,0"] * 3
    assert rates[12:] == ["--rate_iops=3200,1600"] * 3 + ["--rate_iops=6400,3200"] * 3
    for row in status.dataPath:
        unthrottled = (row.readIOPS or 0) + (row.writeIOPS or 0)
        assert [level.percent for level in row.levels] == [25, 50]
        for level in row.levels:
            achieved = (level.readIOPS or 0) + (level.writeIOPS or 0)
            assert level.state == StepState.SUCCEEDED and level.targetIOPS is not None
            assert achieved == pytest.approx(level.targetIOPS, rel=0.001), level
            assert achieved == pytest.approx(unthrottled * level.percent / 100, rel=0.01), level
            assert level.readP99 == pytest.approx(0.0009)
    as_run = _as_run(status, run_spec)
    headers, rows = level_table(as_run) or ([], [])
    assert headers[:5] == ["Workload", "Level", "Target IOPS", "Achieved IOPS", "Of target"]
    assert [r[1] for r in rows] == ["unthrottled", "25%", "50%"] * 2 and rows[1][4] == "100%"
    assert "Data path under load (rate levels)" in render_table(as_run)
    report = stored_report(fake)
    record = next(s for s in report["steps"] if s["status"]["name"] == "dataPath")
    assert merged_histograms(record)["randRead"] == {"read": {250000: 294, 900000: 6}}  # the 3 unthrottled pods
    assert sum(1 for v in record["extra"]["volumes"] if v.get("ratePercent") == 25) == 6
    page = build_run_html(as_run, report)
    assert page.count('<div class="plot levels"><svg') == 1 and "Latency under load" in page


def test_rate_levels_are_percents_in_increasing_order() -> None:
    assert DataPathSpec(rateLevels=[10, 50, 100]).slots == 4
    for bad in ([50, 10], [10, 10], [0], [101], list(range(1, 12))):
        with pytest.raises(ValidationError):
            DataPathSpec(rateLevels=bad)
    assert level_rates(DataPathRow(name="r", state=StepState.SUCCEEDED, readIOPS=1000.0, writeIOPS=0.0), 10, 4) \
        == (25, 0)
    assert level_rates(DataPathRow(name="r", state=StepState.SUCCEEDED, readIOPS=2.0, writeIOPS=0.0), 10, 4) \
        == (1, 0)  # never 0 (fio: unlimited) for a direction the row drove
    assert level_rates(DataPathRow(name="r", state=StepState.FAILED), 10, 4) is None


def verify_spec(**more: Any) -> BenchmarkRunSpec:
    return spec(volumes=3, pvcsPerPod=1, size="64Mi", volumeSnapshotClassName="snap",
                dataPath={"rampSeconds": 0, "runtimeSeconds": 1, "verify": True, "volumes": 2,
                          "workloads": [{"name": "w", "pattern": "write", "blockSize": "64Ki"}]}, **more)


def test_verify_checksums_the_volumes_after_the_data_path_and_holds_each_clone_against_its_source() -> None:
    """verify: a checksum pod per data-path volume after the matrix, kept in the step's record; verifyClone, after
    cloneFromSnapshot, a pod per clone whose source was checksummed (the third volume was not: skipped)."""
    fake = FakeKube()
    status = run(fake, verify_spec())
    assert status.phase == "Succeeded", status.message
    names = [s.name for s in status.steps]
    assert names.index("verifyClone") == names.index("cloneFromSnapshot") + 1
    assert names.index("deleteClone") == names.index("verifyClone") + 1
    data_path = next(s for s in status.steps if s.name == "dataPath")
    assert (data_path.objects, data_path.succeeded) == (4, 4)  # one workload on 2 volumes, then 2 checksums
    verify = next(s for s in status.steps if s.name == "verifyClone")
    assert (verify.objects, verify.succeeded, verify.skipped) == (3, 2, 1), verify
    record = next(r for r in stored_report(fake)["steps"] if r["status"]["name"] == "dataPath")
    sums = record["extra"]["checksums"]
    assert sorted(sums) == [NAMES.volume(0), NAMES.volume(1)]
    assert sums[NAMES.volume(0)] == checksum.parse_checksums(fake_checksums(
        {"spec": {"volumes": [{"persistentVolumeClaim": {"claimName": NAMES.volume(0)}}]}})[1])
    pods = [body for path, body in fake.created if path.endswith("/pods")]
    verify_pods = [p for p in pods if p["metadata"]["name"].startswith(NAMES.verify_pod(0)[:-5])]
    assert [p["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] for p in verify_pods] == [
        NAMES.clone(0), NAMES.clone(1)]
    assert verify_pods[0]["spec"]["containers"][0]["command"] == ["sh", "-c", checksum.SCRIPT]
    assert owned_left(fake) == []


def test_a_clone_whose_data_differs_from_its_source_fails_with_the_file_named() -> None:
    def corrupt_second_clone(pod: Any) -> tuple[int, str]:
        volume = pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"]
        if "sha256sum" in " ".join(pod["spec"]["containers"][0]["command"]):
            return fake_checksums(pod, corrupt=volume == NAMES.clone(1))
        return fake_fio(pod)
    status = run(FakeKube(Behaviour(workload=corrupt_second_clone)), verify_spec())
    assert status.phase == "Failed"
    verify = next(s for s in status.steps if s.name == "verifyClone")
    assert (verify.succeeded, verify.failed) == (1, 1)
    reason = verify.failureReasons[0]
    assert reason.reason == "DataMismatch" and f"clone {NAMES.clone(1)}: csibench.1.0 has sha256" in reason.message
    assert f"its source {NAMES.volume(1)}'s was" in reason.message and "(1 of 2 files differ)" in reason.message


def test_a_verify_pod_that_could_not_run_fails_its_clone_with_its_own_reason_not_a_missing_log() -> None:
    from csibench.kube.client import ApiError
    refused = Behaviour(refuse_create=lambda plural, name: ApiError(403, "Forbidden", "exceeded quota: pods")
                        if name == NAMES.verify_pod(0) else None)
    status = run(FakeKube(refused), verify_spec())
    verify = next(s for s in status.steps if s.name == "verifyClone")
    assert (verify.succeeded, verify.failed) == (1, 1), verify
    assert verify.failureReasons[0].reason != "LogUnavailable" and "quota" in verify.failureReasons[0].message


@pytest.mark.parametrize("step", ["dataPath", "verifyClone"])
def test_a_pod_that_ran_but_whose_log_the_api_refuses_fails_with_log_unavailable_and_the_servers_words(
        step: str) -> None:
    from csibench.kube.client import ApiError
    fake = FakeKube()
    refused = NAMES.verify_pod(0) if step == "verifyClone" else NAMES.data_pod(0)
    text = fake.text

    async def refusing(path: str, query: dict[str, str] | None = None) -> str:
        name = path.split("/")[-2]
        if name == refused:
            raise ApiError(500, "InternalError", "etcd " + "x" * 900)
        return await text(path, query)
    fake.text = refusing  # type: ignore[method-assign]
    status = run(fake, verify_spec())
    failed = next(s for s in status.steps if s.name == step)
    reason = failed.failureReasons[0]
    assert reason.reason == "LogUnavailable" and reason.message.startswith("pods/log of "), reason
    assert "500 InternalError: etcd" in reason.message and len(reason.message) <= 600


def test_a_level_or_baseline_under_way_when_the_step_is_cut_short_is_interrupted_without_numbers() -> None:
    from csibench.api.models import DataPathBaseline, DataPathLevel
    from csibench.engine.steps.datapath.step import RESULTS
    row = DataPathRow(name="r", state=StepState.SUCCEEDED, readIOPS=100.0, levels=[
        DataPathLevel(percent=10, state=StepState.SUCCEEDED, readIOPS=10.0),
        DataPathLevel(percent=50, state=StepState.RUNNING, readIOPS=40.0, targetIOPS=50.0)],
        baseline=DataPathBaseline(state=StepState.RUNNING, readMiBps=3.0))
    RESULTS.interrupt_running([row])
    assert row.state == StepState.SUCCEEDED and row.readIOPS == 100.0  # done before: kept
    assert row.levels[0].readIOPS == 10.0 and row.levels[1].state == StepState.INTERRUPTED
    assert (row.levels[1].readIOPS, row.levels[1].targetIOPS) == (None, None)
    assert row.baseline is not None and row.baseline.state == StepState.INTERRUPTED
    assert row.baseline.readMiBps is None and "interrupted" in (row.baseline.message or "")


def test_verify_is_admitted_only_with_its_step_and_a_snapshot_class() -> None:
    base = {"storageClassName": "sim", "volumeSnapshotClassName": "snap",
            "dataPath": {"verify": True, "rampSeconds": 0}}
    with pytest.raises(ValidationError, match=r"steps must list verifyClone exactly when spec\.dataPath\.verify "
                                              r"is true"):
        BenchmarkRunSpec.model_validate({**base, "steps": ["createVolume", "dataPath", "createSnapshot",
                                                           "cloneFromSnapshot"]})
    with pytest.raises(ValidationError, match="needs volumeSnapshotClassName"):
        BenchmarkRunSpec.model_validate({**base, "volumeSnapshotClassName": None})
    assert checksum.mismatch({"a": "1" * 64}, {}, "c", "v") == "clone c lacks 1 of the 1 files its source v " \
        "had when it was snapshotted (a)"
    assert checksum.parse_checksums("sha256sum: csibench.*: No such file or directory\n") == {}


def test_a_volume_much_slower_than_the_rest_is_named_in_the_row_a_warning_and_the_report() -> None:
    from csibench.report.datapath import notes

    def one_slow(pod: Any) -> tuple[int, str]:
        claim = pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"]
        return fake_fio(pod, 10 * 2**20 if claim == NAMES.volume(2) else 100 * 2**20, 5 * 2**20)
    fake = FakeKube(Behaviour(workload=one_slow))
    run_spec = spec(volumes=4, pvcsPerPod=1, size="64Mi", dataPath={
        "rampSeconds": 0, "runtimeSeconds": 1, "workloads": [{"name": "r", "pattern": "randread", "blockSize": "4Ki"}]})
    status = run(fake, run_spec)
    assert status.phase == "Succeeded", status.message
    assert status.dataPath[0].slowVolumes == [NAMES.volume(2)]
    warnings = [o["message"] for o in fake.named("events", REF.namespace).values()
                if o["reason"] == "DataPathSlowVolume"]
    assert warnings == [f"r: 1 of 4 volumes ran under half the median per-volume bandwidth: {NAMES.volume(2)} on "
                        "node-2 (10 MiB/s)"], warnings
    assert any(NAMES.volume(2) in line and "under half the median" in line for line in notes(
        _as_run(status, run_spec)))
    even = run(FakeKube(), run_spec)
    assert even.dataPath[0].slowVolumes == []


def test_the_local_baseline_runs_each_workload_on_an_emptydir_on_the_same_nodes_and_flags_a_faster_class() -> None:
    from csibench.report.datapath import baseline_table, merged_histograms, notes

    def slow_local_disk(pod: Any) -> tuple[int, str]:
        local = "emptyDir" in pod["spec"]["volumes"][0]
        return fake_fio(pod, 20 * 2**20 if local else 100 * 2**20, 5 * 2**20)
    run_spec = data_spec(localBaseline=True, workloads=[{"name": "r", "pattern": "randread", "blockSize": "4Ki"}])
    fake = FakeKube(Behaviour(workload=slow_local_disk))
    status = run(fake, run_spec)
    assert status.phase == "Succeeded", status.message
    row = status.dataPath[0]
    assert row.baseline is not None and row.baseline.state == StepState.SUCCEEDED
    assert (row.readMiBps, row.baseline.readMiBps, row.baseline.fasterThanLocal) == (300.0, 60.0, True)
    pods = [body for path, body in fake.created if path.endswith("/pods")]
    local = [p for p in pods if "emptyDir" in p["spec"]["volumes"][0]]
    assert len(local) == 3 and all("initContainers" in p["spec"] for p in local)
    preferred = [p["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0][
        "preference"]["matchFields"][0]["values"][0] for p in local]
    assert preferred == ["node-0", "node-1", "node-2"]  # the nodes the volumes' pods ran on
    as_run = _as_run(status, run_spec)
    headers, rows = baseline_table(as_run) or ([], [])
    assert headers[:4] == ["Workload", "Class MiB/s", "Local MiB/s", "Class / local"]
    assert rows[0][3] == "5.00×" and rows[0][-1].startswith("faster than local")
    assert any("faster than the nodes' own disk" in line for line in notes(as_run))
    record = next(r for r in stored_report(fake)["steps"] if r["status"]["name"] == "dataPath")
    assert merged_histograms(record)["r"]["read"] == {250000: 294, 900000: 6}  # the class's pods only
    assert run(FakeKube(), run_spec).dataPath[0].baseline.fasterThanLocal is False  # type: ignore[union-attr]


def test_the_report_keeps_each_rows_histograms_merged_and_per_pod_ones_only_for_small_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Per-pod histograms at 1024 volumes x 16 workloads would be ~130 MB of JSON: each row's merged histograms
    (and per node, up to 16 nodes) are kept whatever the size, per-pod ones only up to PER_POD_HISTOGRAMS pods."""
    from csibench.engine.steps.datapath import pods as datapath_pods
    from csibench.report.datapath import merged_histograms, node_histograms
    from csibench.report.html import build_run_html
    run_spec = data_spec(workloads=[{"name": "r", "pattern": "randread", "blockSize": "4Ki"}])
    monkeypatch.setattr(datapath_pods, "PER_POD_HISTOGRAMS", 2)  # 3 pods: a run too large for per-pod histograms
    fake = FakeKube()
    status = run(fake, run_spec)
    assert status.phase == "Succeeded", status.message
    record = next(r for r in stored_report(fake)["steps"] if r["status"]["name"] == "dataPath")
    assert all("readClatBins" not in v for v in record["extra"]["volumes"])
    assert merged_histograms(record) == {"r": {"read": {250000: 294, 900000: 6}}}  # 3 pods, from the row's merge
    assert node_histograms(record, "r") == {f"node-{i}": {"read": {250000: 98, 900000: 2}} for i in range(3)}
    page = build_run_html(_as_run(status, run_spec), stored_report(fake))
    assert "node-1 read" in page and "all read" in page  # the CDF's per-node lines beside the whole row's
    log = (GOLDEN / "fio-randrw-json-plus.log").read_text()
    one = parse_fio_log(log)
    kept = row_histograms([one] * 1024, [f"node-{i % 64}" for i in range(1024)])
    assert "nodes" not in kept and len(json.dumps(kept)) < 40_000  # bounded: beyond 16 nodes, the row's only


def test_a_repeated_data_path_keeps_each_workloads_iterations_and_compare_tests_each_measure() -> None:
    """repeat 3: status keeps per workload the median and range over the iterations and each iteration's MiB/s,
    IOPS and p99; compare of two repeated runs tests each measure per workload (Welch on logs, Holm)."""
    from csibench.report.compare import render_compare
    from csibench.report.datapath import aggregate_table, compare_table
    from csibench.report.render import render_table

    def jittered(scale: float) -> Any:
        rates = iter([1.00, 1.02, 0.98, 1.01, 0.99, 1.03] * 10)

        def workload(pod: Any) -> tuple[int, str]:
            factor = next(rates) * scale
            return fake_fio(pod, 100 * 2**20 * factor, 50 * 2**20 * factor)
        return workload
    run_spec = spec(volumes=1, pvcsPerPod=1, size="64Mi", repeat=3, dataPath={
        "rampSeconds": 0, "runtimeSeconds": 1, "workloads": [{"name": "r", "pattern": "randread", "blockSize": "4Ki"}]})
    base = run(FakeKube(Behaviour(workload=jittered(1.0))), run_spec)
    assert base.phase == "Succeeded", base.message
    (aggregate,) = base.dataPathAggregates
    assert aggregate.name == "r" and aggregate.iterations == 3 and len(aggregate.mibpsValues) == 3
    assert aggregate.mibps is not None and aggregate.mibps.min < aggregate.mibps.median < aggregate.mibps.max
    assert aggregate.p99Values == [0.0009] * 3
    as_base = _as_run(base, run_spec, "base")
    headers, rows = aggregate_table(as_base) or ([], [])
    assert headers[1] == "Iterations" and rows[0][1] == "3" and "Data path over the iterations" in render_table(
        as_base)
    faster = _as_run(run(FakeKube(Behaviour(workload=jittered(3.0))), run_spec), run_spec, "faster")
    headers, rows = compare_table(as_base, faster) or ([], [])
    assert headers[3:] == ["B vs A (MiB/s)", "B vs A (IOPS)", "B vs A (p99, lower is better)"]
    assert rows[0][3].startswith("3.00× (significant") and rows[0][4].startswith("3.00× (significant")
    assert rows[0][5] == "1.00× (significance unknown, n=3)"  # the fake's p99 never varies: nothing to test
    assert "Holm-adjusted over every workload and measure" in render_compare(as_base, faster)
    lacking = json.loads(json.dumps(faster))
    lacking["status"]["dataPathAggregates"][0]["name"] = "other"  # B has another workload than A: both listed
    headers, rows = compare_table(as_base, lacking) or ([], [])
    assert [r[0] for r in rows] == ["r", "other"] and rows[0][3:] == ["-", "-", "-"] and rows[1][1] == "-"


def test_measured_rows_become_metrics_in_base_units_without_per_volume_labels() -> None:
    from prometheus_client import generate_latest  # the default registry: the operator's metrics are there

    from csibench.engine.steps.datapath.step import record_metrics
    from csibench.metrics import METRICS
    status = run(FakeKube(), data_spec())
    record_metrics("runs/metered", status.dataPath)
    text = generate_latest().decode()
    assert 'csibench_datapath_bandwidth_bytes_per_second{direction="read",run="runs/metered",workload="seqRead"} ' \
           f'{float(3 * 100 * 2**20)!r}'.replace("314572800.0", "3.145728e+08") in text
    assert 'csibench_datapath_operations_per_second{direction="write",run="runs/metered",workload="randWrite"}' \
        in text
    assert 'quantile="0.99"' in text and "volume=" not in text
    METRICS.forget_run("runs/metered")
    assert 'run="runs/metered"' not in generate_latest().decode()


@pytest.mark.parametrize("name", ["datapath.yaml", "datapath-full.yaml"])
def test_the_examples_are_shaped_like_the_published_table_and_valid(name: str) -> None:
    import yaml

    from localcluster.launcher import REPO_ROOT
    example = yaml.safe_load((REPO_ROOT / "examples" / name).read_text())
    run_spec = BenchmarkRunSpec.model_validate(example["spec"])
    assert run_spec.dataPath is not None
    assert [(w.name, w.pattern.value, w.blockSize) for w in run_spec.dataPath.workloads] == [
        (w.name, w.pattern.value, w.blockSize) for w in default_workloads()]
    assert run_spec.dataPath.startDelaySeconds >= 1
    if name == "datapath-full.yaml":  # it shows every newer field
        assert run_spec.dataPath.rateLevels and run_spec.dataPath.localBaseline and run_spec.dataPath.verify
    else:  # the quick one: one pass per workload
        assert not run_spec.dataPath.rateLevels and not run_spec.dataPath.localBaseline


def test_restart_policy_fail_marks_the_row_under_way_interrupted_without_numbers() -> None:
    run_spec = spec(volumes=3, pvcsPerPod=1, size="64Mi", restartPolicy="Fail", dataPath={
        "rampSeconds": 0, "runtimeSeconds": 1, "workloads": [{"name": "a", "pattern": "read", "blockSize": "8Ki"},
                                                             {"name": "b", "pattern": "write", "blockSize": "8Ki"},
                                                             {"name": "c", "pattern": "randread", "blockSize": "8Ki"}]})
    measured = {"name": "a", "state": "Succeeded", "pattern": "read", "blockSize": "8Ki", "volumes": 3, "jobs": 6,
                "readMiBps": 10.0, "writeMiBps": 0.0}
    half = {**measured, "name": "b", "state": "Running", "pattern": "write", "writeMiBps": 5.0}
    previous = {"phase": "Running", "targetNamespace": "csibench-bench-0a1b2",
                "steps": [{"name": "createVolume", "state": "Succeeded", "objects": 3, "succeeded": 3},
                          {"name": "dataPath", "state": "Running", "objects": 9}],
                "dataPath": [measured, half, {"name": "c", "state": "Pending"}]}
    status = run(FakeKube(), run_spec, previous)
    assert status.phase is not None and status.phase.value == "Failed"
    rows = {row.name: row for row in status.dataPath}
    assert rows["a"].state == StepState.SUCCEEDED and rows["a"].readMiBps == 10.0  # a finished row stays
    assert rows["b"].state == StepState.INTERRUPTED and rows["b"].writeMiBps is None  # never half a measurement
    assert rows["c"].state == StepState.PENDING


# -- what a user reads (issue 32) ------------------------------------------------------------------------------
DISK_FULL_LOG = (GOLDEN / "fio-disk-full.log").read_text()  # fio 3.33, 2 jobs on a full ext4 volume, as captured


def test_a_full_volumes_message_counts_fios_repeated_lines_and_keeps_its_last_line_whole() -> None:
    with pytest.raises(FioFailed) as failed:
        parse_fio_log(DISK_FULL_LOG)
    message = str(failed.value)
    last = "fio: pid=5627, err=28/file:io_u.c:1876, func=io_u error, error=No space left on device"
    assert message == ("8× fio: io_u error on file /data/csibench.1.0: No space left on device: write "
                       "offset=2359296, buflen=65536 (numbers differ); " + last)
    row = build_row(DataPathSpec(), default_workloads()[1], [], [("Failed", message)] * 2, 3.0)
    assert row.message == "2 of 2 pods failed (Failed): " + message
    step = StepStatus(name="dataPath", state=StepState.FAILED, objects=2, failed=2,
                      failureReasons=[FailureReason(reason="Failed", count=2, message=row.message)])
    assert failure_summary(step).endswith(last)  # what the Ready condition says keeps fio's summary whole
    with pytest.raises(FioFailed) as engine:  # fio's most specific line can also come first: the order stays
        parse_fio_log("fio: engine nosuch not loadable\nfio: failed to load engine\n")
    assert str(engine.value) == "fio: engine nosuch not loadable; fio: failed to load engine"


def test_messages_are_cut_at_a_word_and_say_so() -> None:
    text = "fio: io_u error on file /data/csibench.0.0: No space left on device " * 3
    cut = shorten(text, 100)
    assert len(cut) <= 100 and cut.endswith("…") and text.startswith(cut.removesuffix("…"))
    assert text[len(cut.removesuffix("…"))] == " "  # the cut fell between words
    assert shorten("short", 100) == "short" and len(shorten("x" * 300, 50)) == 50
    assert collapse_lines(["a 1", "", "b", "a 2", "a 3"], 100) == "3× a 1 (numbers differ); b"
    assert collapse_lines(["same", "same"], 100) == "2× same"
    many = collapse_lines([f"line {word} {'x' * 40}" for word in "abcdefgh"] + ["the summary"], 150)
    assert many.startswith("line a ") and many.endswith("; …; the summary") and len(many) <= 150


def test_the_files_must_leave_the_filesystem_its_room_on_a_class_that_formats() -> None:
    fits = spec(volumes=2, size="64Mi", dataPath={"jobsPerVolume": 2, "fileSize": "16Mi"})
    full = spec(volumes=2, size="32Mi", dataPath={"jobsPerVolume": 2, "fileSize": "16Mi"})
    small = spec(volumes=1, size="8Mi", dataPath={"jobsPerVolume": 1, "fileSize": "1Mi"})
    ext4 = {FSTYPE_PARAMETER: "ext4"}
    assert files_that_do_not_fit(fits, ext4) is None and files_that_do_not_fit(small, ext4) is None
    assert files_that_do_not_fit(full, {}) is None and files_that_do_not_fit(full, {FSTYPE_PARAMETER: ""}) is None
    message = files_that_do_not_fit(full, ext4)
    assert message is not None and "(2 x 16Mi = 32Mi, every workload)" in message
    assert "volumes of 32Mi formatted ext4" in message and "24% of the volume plus 1Mi" in message
    assert "at most 23.3Mi of files fit" in message
    assert files_that_do_not_fit(full, {"fsType": "xfs"}) == message.replace("formatted ext4", "formatted xfs")
    one_big = spec(volumes=1, size="64Mi", dataPath={"jobsPerVolume": 1, "workloads": [
        {"name": "small", "pattern": "read", "blockSize": "8Ki", "fileSize": "8Mi"},
        {"name": "big", "pattern": "write", "blockSize": "8Ki", "fileSize": "60Mi"}]})
    assert "(1 x 60Mi = 60Mi, workload big)" in (files_that_do_not_fit(one_big, ext4) or "")
    large = spec(volumes=1, size="1Gi", dataPath={"jobsPerVolume": 1, "fileSize": "1000Mi"})
    assert "6% of the volume plus 8Mi; at most 954.6Mi" in (files_that_do_not_fit(large, ext4) or "")


@pytest.mark.parametrize("mebibytes", [4, 8, 12, 16, 32, 64, 256, 511, 512, 520, 1024, 2048, 8192])
def test_the_room_left_covers_what_mkfs_ext4_takes_as_kubernetes_formats(mebibytes: int, tmp_path: Path) -> None:
    image = tmp_path / "volume.img"
    with image.open("wb") as file:
        file.truncate(mebibytes * MIB)  # sparse: nothing is written but the filesystem's metadata
    subprocess.run(["mkfs.ext4", "-F", "-q", "-m", "0", "-E", "nodiscard", str(image)], check=True)
    header = subprocess.run(["dumpe2fs", "-h", str(image)], check=True, capture_output=True, text=True).stdout
    facts = dict(line.split(":", 1) for line in header.splitlines() if ":" in line)
    free = int(facts["Free blocks"]) * int(facts["Block size"])
    room = room_for_files(mebibytes * MIB)
    assert room <= free - 64 * 1024  # and the files' own extents and directory
    assert room >= 0.6 * free  # and it does not refuse what plainly fits


def test_a_data_path_that_cannot_fit_the_formatted_volume_fails_before_anything_is_created() -> None:
    fake = FakeKube()
    fake.objects[("storageclasses", "", "sim")]["parameters"][FSTYPE_PARAMETER] = "ext4"
    status = run(fake, spec(volumes=3, pvcsPerPod=1, size="32Mi", dataPath={"jobsPerVolume": 2, "fileSize": "16Mi"}))
    assert status.phase is not None and status.phase.value == "Failed"
    assert status.conditions[0].reason == "DataPathDoesNotFit" and "at most 23.3Mi" in (status.message or "")
    assert [path for verb, path in fake.timeline if verb in ("POST", "DELETE") and "/events/" not in path] == []
    assert owned_left(fake) == []


def test_columns_say_what_they_hold_and_workload_steps_show_wall_time_not_pod_rates() -> None:
    from csibench.report.compare import render_compare
    from csibench.report.datapath import table
    from csibench.report.render import step_table
    run_spec = data_spec(volumes=2, jobsPerVolume=1)
    base = _as_run(run(FakeKube(), run_spec), run_spec, "base")
    headers, rows = table(base) or ([], [])
    assert {row[headers.index("Volumes × jobs each")] for row in rows} == {"2 × 1"}
    mixed = {"name": "randReadWrite", "pattern": "randrw", "blockSize": "8Ki", "volumes": 1, "jobs": 2,
             "latency": {"readP50": 0.0002, "readP99": 0.009, "readP999": 0.012, "writeP50": 0.004,
                         "writeP99": 0.005}}  # no writeP999: a row an older operator wrote
    headers, rows = table({"status": {"dataPath": [mixed]}}) or ([], [])
    cells = dict(zip(headers, rows[0], strict=True))
    assert (cells["Read clat p50/p99/p99.9 ms"], cells["Write clat p50/p99/p99.9 ms"]) == (
        "0.20/9.00/12.00", "4.00/5.00/-")
    assert cells["Volumes × jobs each"] == "1 × 2"
    headers, rows = step_table(base)
    step = dict(zip(headers, next(row for row in rows if row[0] == "Data Path (fio)"), strict=True))
    assert step["Time · throughput"].endswith(" (wall time; its table below)") and "/s" not in step["Time · throughput"]
    assert [step[name] for name in ("p50 s", "p90 s", "p99 s", "max s")] == ["", "", "", ""]
    assert next(row for row in rows if row[0] == "Create Volume")[1].endswith("vol/s")  # lifecycle steps keep theirs
    compared = next(line for line in render_compare(base, base).splitlines() if line.startswith("Data Path (fio)"))
    assert "pod/s" not in compared and compared.rstrip().endswith("(its table below)")


def test_a_pod_that_failed_without_a_word_in_its_logs_is_described_by_its_containers_states() -> None:
    from csibench.engine.steps.datapath.pods import container_states
    status = {"phase": "Failed", "initContainerStatuses": [
        {"name": "layout", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}],
        "containerStatuses": [{"name": "fio", "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]}
    assert container_states(status) == ("init container layout: terminated, exit code 0 (Completed); "
                                        "container fio: terminated, exit code 137 (OOMKilled)")
    waiting = {"phase": "Failed", "reason": "Evicted", "message": "low on ephemeral storage",
               "containerStatuses": [{"name": "fio", "state": {"waiting": {"reason": "PodInitializing"}}}]}
    assert container_states(waiting) == ("container fio: waiting (PodInitializing); pod: Evicted low on ephemeral "
                                         "storage")
    assert container_states(None) == "" and container_states({"phase": "Failed"}) == ""


def test_a_repeated_runs_p99_below_a_millisecond_is_shown_in_microseconds() -> None:
    # issue 42 point 3: round only for display, and display microseconds below 1 ms (0.125 ms read "0.1")
    from csibench.report.datapath import aggregate_table

    run = {"status": {"dataPathAggregates": [{"name": "seqRead", "iterations": 3,
                                              "p99": {"median": 0.000125, "min": 0.0000405, "max": 0.0012}}]}}
    found = aggregate_table(run)
    assert found is not None and found[1][0][-1] == "125 µs (40.5 µs-1.2 ms)"
