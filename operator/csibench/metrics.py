"""Prometheus metrics of the operator (docs/architecture.md): ``csibench_*`` names, base units, bounded labels.

Labels are run ("namespace/name"), step, storage class, result, and for API traffic verb/resource/code: never
an object name, so cardinality is bounded by the number of runs. A run's series stay after it finishes (Grafana
shows finished runs) and are removed when the run is deleted. This module is a leaf: it imports nothing of
csibench, and the engine and the kube adapter report into it.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections import defaultdict
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, start_http_server

# 10 ms to 1 h: a fast array's attach and a slow array's 1000-volume clone fall in the same histogram.
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
                   1200.0, 1800.0, 3600.0)
VERDICTS = ("Pass", "Fail", "Unknown")  # models.Verdict's values (this module imports nothing of csibench)
# A suite's axes (api/suite.py AXES) and their label names (this module imports nothing of csibench).
SUITE_AXIS_LABELS = {"storageClassName": "storage_class", "volumes": "volumes", "pvcsPerPod": "pvcs_per_pod",
                     "size": "size", "client": "client", "dataPath": "data_path", "database": "database"}
_RESOURCE = re.compile(r"^/(?:api/v1|apis/[^/]+/[^/]+)(?:/namespaces/[^/]+)?/([^/?]+)")


DISRUPTION_FIGURES = ("recoverySeconds", "stallSeconds", "leaderSeconds", "unrecovered", "containerRestarts",
                      "leaseTransitions")


def resource_of(path: str) -> str:
    """'/api/v1/namespaces/ns/persistentvolumeclaims/x' -> 'persistentvolumeclaims' (a bounded label)."""
    match = _RESOURCE.match(path)
    if not match:
        return "other"
    resource = match.group(1)
    # "/api/v1/namespaces/x" itself (no sub-resource) is the namespaces resource.
    return resource if not path.rstrip("/").endswith(f"/namespaces/{resource}") else "namespaces"


class Metrics:
    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.object_latency = Histogram(
            "csibench_object_latency_seconds",
            "Per-object latency of a step: submit to terminal watch event, on the operator's clock.",
            ["run", "step", "storage_class", "result"], buckets=LATENCY_BUCKETS, registry=registry)
        self.step_duration = Gauge("csibench_step_duration_seconds", "Clock time of a step (start to last terminal "
                                   "event).", ["run", "step", "storage_class"], registry=registry)
        self.step_throughput = Gauge("csibench_step_throughput_objects_per_second",
                                     "Succeeded objects per second of step time.", ["run", "step", "storage_class"],
                                     registry=registry)
        self.step_objects = Gauge("csibench_step_objects", "Objects of a step by result.",
                                  ["run", "step", "storage_class", "result"], registry=registry)
        self.runs = Gauge("csibench_runs", "BenchmarkRuns known to the operator, by phase.", ["phase"],
                          registry=registry)
        self.api_requests = Counter("csibench_api_requests_total", "API requests sent by runs.",
                                    ["verb", "resource", "code"], registry=registry)
        self.throttled = Counter("csibench_client_throttled_seconds_total",
                                 "Time requests waited for the client-side rate limit.", ["run"], registry=registry)
        # The data path (spec.dataPath): one series per run, workload and direction (read/write); no per-volume
        # labels. Bandwidth in bytes per second, IOPS in operations per second, latency in seconds.
        self.datapath_bandwidth = Gauge("csibench_datapath_bandwidth_bytes_per_second",
                                        "Data-path bandwidth summed over the row's volumes.",
                                        ["run", "workload", "direction"], registry=registry)
        self.datapath_iops = Gauge("csibench_datapath_operations_per_second",
                                   "Data-path IOPS summed over the row's volumes.", ["run", "workload", "direction"],
                                   registry=registry)
        self.datapath_latency = Gauge("csibench_datapath_completion_latency_seconds",
                                      "Data-path completion latency (fio clat) percentile over every pod's "
                                      "completions (their histograms merged).",
                                      ["run", "workload", "direction", "quantile"], registry=registry)
        self.datapath_duration = Gauge("csibench_datapath_duration_seconds", "Wall time of a data-path row.",
                                       ["run", "workload"], registry=registry)
        # The database (spec.database): one series per run and pgbench run (scale, mode, clients), the
        # initialization per scale. TPS in transactions per second, latency in seconds, WAL in bytes.
        run_labels = ["run", "scale", "mode", "clients"]
        self.database_tps = Gauge("csibench_database_transactions_per_second",
                                  "pgbench TPS excluding connection time.", run_labels, registry=registry)
        self.database_latency_average = Gauge("csibench_database_latency_average_seconds",
                                              "pgbench latency average.", run_labels, registry=registry)
        self.database_latency_stddev = Gauge("csibench_database_latency_stddev_seconds",
                                             "pgbench latency standard deviation.", run_labels, registry=registry)
        self.database_wal = Gauge("csibench_database_wal_bytes", "WAL generated by one pgbench run.", run_labels,
                                  registry=registry)
        self.database_failed = Gauge("csibench_database_failed_transactions",
                                     "Failed transactions of one pgbench run.", run_labels, registry=registry)
        self.database_initialize = Gauge("csibench_database_initialize_seconds",
                                         "Wall time of pgbench -i for a scale.", ["run", "scale"], registry=registry)
        # The parts of a step's per-object latency where events tell them apart (expandVolume: controller, node;
        # moveVolume: gone, detach, attach, ready), in seconds.
        self.step_phase_latency = Gauge("csibench_step_phase_latency_seconds",
                                        "Per-object latency of one part of a step (percentile over the objects).",
                                        ["run", "step", "phase", "quantile"], registry=registry)
        # The density ramp (spec.density): one series per run and level (volumes per node), in seconds.
        self.density_latency = Gauge("csibench_density_pod_ready_seconds",
                                     "Per-pod time to Ready at a level of volumes per node (percentile).",
                                     ["run", "volumes_per_node", "quantile"], registry=registry)
        self.density_attach = Gauge("csibench_density_attach_seconds",
                                    "Per-pod time to every volume attached at a level of volumes per node (p50).",
                                    ["run", "volumes_per_node"], registry=registry)
        self.density_throughput = Gauge("csibench_density_volumes_per_second",
                                        "Volumes published per second at a level of volumes per node.",
                                        ["run", "volumes_per_node"], registry=registry)
        self.density_detach = Gauge("csibench_density_detach_seconds",
                                    "Time to unpublish a level of volumes per node (every pod gone and detached).",
                                    ["run", "volumes_per_node"], registry=registry)
        # The churn (spec.churn): its latest window, per phase; what its finished waves left; the components' memory.
        self.churn_throughput = Gauge("csibench_churn_window_completions_per_second",
                                      "Completions per second of a churn phase in the latest window.",
                                      ["run", "phase"], registry=registry)
        self.churn_latency = Gauge("csibench_churn_window_latency_seconds",
                                   "Per-object latency of a churn phase in the latest window (percentile).",
                                   ["run", "phase", "quantile"], registry=registry)
        self.churn_leaks = Gauge("csibench_churn_leaked_objects",
                                 "What the churn's finished waves left behind, counted at the latest window's end "
                                 "(volumes: the array's, nothing names them; attachments; released PVs).",
                                 ["run", "kind"], registry=registry)
        self.churn_memory = Gauge("csibench_churn_window_memory_bytes",
                                  "A CSI component's peak memory in the churn's latest window.",
                                  ["run", "component"], registry=registry)
        # The class change (spec.modify): fio on the volumes before and after, summed over them.
        self.modify_iops = Gauge("csibench_modify_operations_per_second",
                                 "fio IOPS (read + write) summed over the volumes, before or after the "
                                 "VolumeAttributesClass change.", ["run", "when"], registry=registry)
        self.modify_bandwidth = Gauge("csibench_modify_bandwidth_bytes_per_second",
                                      "fio bandwidth (read + write) summed over the volumes, before or after the "
                                      "VolumeAttributesClass change.", ["run", "when"], registry=registry)
        # The shared volume (spec.shared): one series per run and probe phase; latency in seconds.
        self.shared_rate = Gauge("csibench_shared_operations_per_second",
                                 "Shared-volume probe: operations per second of a phase, every pod together.",
                                 ["run", "phase"], registry=registry)
        self.shared_latency = Gauge("csibench_shared_latency_seconds",
                                    "Shared-volume probe: per-operation latency percentile of a phase over every "
                                    "pod (visibility: half the round trip between two nodes).",
                                    ["run", "phase", "quantile"], registry=registry)
        # What Prometheus said about each step's window (spec.collect): the CSI machinery's CPU-seconds and peak
        # memory per container (query cpuSeconds, peakMemoryBytes) and the run's own queries, one series per
        # step, query and component (the series' container label, else its labels as name=value pairs).
        self.step_collected = Gauge("csibench_step_collected",
                                    "A query of spec.collect over a step's window (its unit is the query's: "
                                    "cpuSeconds in CPU-seconds, peakMemoryBytes in bytes).",
                                    ["run", "step", "query", "component"], registry=registry)
        # spec.disruptions: each one's figures (status.disruptions) by name, in the figure's own unit (seconds,
        # objects, restarts, transitions), and recovered 1 or 0 once its step ended.
        self.disruption = Gauge("csibench_disruption", "A figure of one of the run's disruptions (figure: "
                                "recoverySeconds, stallSeconds, leaderSeconds in seconds; unrecovered objects; "
                                "containerRestarts; leaseTransitions; recovered 1 or 0).",
                                ["run", "disruption", "step", "kind", "figure"], registry=registry)
        # status.leaks: what the run left behind after its cleanup, counted by the array or by the cluster.
        self.leaked = Gauge("csibench_leaked", "What the run left behind after its cleanup (figure: volumes, "
                            "snapshots, leaked; repeatedOperations: creates and deletes the array did twice).",
                            ["run", "source", "figure"], registry=registry)
        # The run's verdict (spec.thresholds, spec.baseline): 1 on the run's verdict (Pass, Fail or Unknown), 0
        # on the others, so an alert reads csibench_run_verdict{verdict="Fail"} == 1; and how many bounds broke.
        self.verdict = Gauge("csibench_run_verdict", "The run's verdict (thresholds and baseline): 1 on the verdict "
                             "it has.", ["run", "verdict"], registry=registry)
        self.thresholds_broken = Gauge("csibench_run_thresholds_broken", "Thresholds of the run that its "
                                       "measurements broke, plus its baseline rows that fail (regressions; Slower "
                                       "with failOnSlower).", ["run"],
                                       registry=registry)
        # Suites (BenchmarkSuite): progress, and per cell the median throughput of each step over its rounds,
        # labelled by the cell's axis values (an axis the suite does not vary is ""), so a scaling curve is one
        # query: csibench_suite_cell_throughput_objects_per_second{suite="ns/s", step="createVolume"} by volumes.
        self.suite_runs = Gauge("csibench_suite_runs", "Runs of a suite: all of them (state=total) and those "
                                "finished (state=done).", ["suite", "state"], registry=registry)
        self.suite_cell_throughput = Gauge(
            "csibench_suite_cell_throughput_objects_per_second",
            "Median over a suite cell's rounds of a step's throughput.",
            ["suite", "cell", "step", *SUITE_AXIS_LABELS.values()], registry=registry)
        # Schedules (BenchmarkSchedule): the verdict of the latest run that has one, as csibench_run_verdict is
        # for a run (the PrometheusRule alerts on it until a later run passes), and the last time a run was made.
        self.schedule_verdict = Gauge("csibench_schedule_last_verdict", "The verdict of the schedule's latest "
                                      "run that has one: 1 on that verdict.", ["schedule", "verdict"],
                                      registry=registry)
        self.schedule_last_time = Gauge("csibench_schedule_last_schedule_timestamp_seconds", "The last time the "
                                        "schedule created a run for (Unix seconds).", ["schedule"], registry=registry)
        self._lock = threading.Lock()
        self._series: dict[str, set[tuple[str, tuple[str, ...]]]] = defaultdict(set)
        self._phases: dict[str, str] = {}

    def _remember(self, run: str, metric: str, labels: tuple[str, ...]) -> None:
        with self._lock:
            self._series[run].add((metric, labels))

    def observe_object(self, run: str, step: str, storage_class: str, ok: bool, seconds: float) -> None:
        labels = (run, step, storage_class, "succeeded" if ok else "failed")
        self.object_latency.labels(*labels).observe(max(seconds, 0.0))
        self._remember(run, "object_latency", labels)

    def record_step(self, run: str, step: str, storage_class: str, duration: float | None,
                    throughput: float | None, succeeded: int, failed: int, skipped: int) -> None:
        labels = (run, step, storage_class)
        if duration is not None:
            self.step_duration.labels(*labels).set(duration)
            self._remember(run, "step_duration", labels)
        if throughput is not None:
            self.step_throughput.labels(*labels).set(throughput)
            self._remember(run, "step_throughput", labels)
        for result, count in (("succeeded", succeeded), ("failed", failed), ("skipped", skipped)):
            self.step_objects.labels(*labels, result).set(count)
            self._remember(run, "step_objects", (*labels, result))

    def record_datapath(self, run: str, workload: str, duration: float | None,
                        directions: dict[str, tuple[float, float, dict[str, float | None]]]) -> None:
        """One measured row: per direction (bytes/s, IOPS, {quantile: clat seconds})."""
        if duration is not None:
            self.datapath_duration.labels(run, workload).set(duration)
            self._remember(run, "datapath_duration", (run, workload))
        for direction, (bandwidth, iops, quantiles) in directions.items():
            labels = (run, workload, direction)
            self.datapath_bandwidth.labels(*labels).set(bandwidth)
            self.datapath_iops.labels(*labels).set(iops)
            self._remember(run, "datapath_bandwidth", labels)
            self._remember(run, "datapath_iops", labels)
            for quantile, value in quantiles.items():
                if value is not None:
                    self.datapath_latency.labels(*labels, quantile).set(value)
                    self._remember(run, "datapath_latency", (*labels, quantile))

    def record_phases(self, run: str, step: str, phases: list[dict[str, Any]]) -> None:
        """A finished step's parts as status has them (``{name, objects, latency: {p50, p99, ...}}``)."""
        for phase in phases:
            latency = phase.get("latency") or {}
            for quantile, key in (("0.5", "p50"), ("0.99", "p99")):
                if latency.get(key) is not None:
                    self.step_phase_latency.labels(run, step, phase["name"], quantile).set(latency[key])
                    self._remember(run, "step_phase_latency", (run, step, phase["name"], quantile))

    def record_collection(self, run: str, step: str, values: list[tuple[str, str, float]]) -> None:
        """A step's collected readings as (query, component, value)."""
        for query, component, value in values:
            self.step_collected.labels(run, step, query, component).set(value)
            self._remember(run, "step_collected", (run, step, query, component))

    def record_density(self, run: str, volumes_per_node: int, p50: float, p99: float, attach_p50: float | None,
                       throughput: float | None, detach: float | None) -> None:
        """One measured level of the density ramp (seconds, volumes per second)."""
        level = str(volumes_per_node)
        for quantile, value in (("0.5", p50), ("0.99", p99)):
            self.density_latency.labels(run, level, quantile).set(value)
            self._remember(run, "density_latency", (run, level, quantile))
        for name, gauge, measured in (("density_attach", self.density_attach, attach_p50),
                                      ("density_throughput", self.density_throughput, throughput),
                                      ("density_detach", self.density_detach, detach)):
            if measured is not None:
                gauge.labels(run, level).set(measured)
                self._remember(run, name, (run, level))

    def record_churn_window(self, run: str, phases: list[tuple[str, float | None, float | None, float | None]],
                            leaks: dict[str, int], memory: list[tuple[str, float]]) -> None:
        """The churn's latest window: per phase (throughput, p50, p99), leaks by kind, memory per component."""
        for phase, throughput, p50, p99 in phases:
            if throughput is not None:
                self.churn_throughput.labels(run, phase).set(throughput)
                self._remember(run, "churn_throughput", (run, phase))
            for quantile, value in (("0.5", p50), ("0.99", p99)):
                if value is not None:
                    self.churn_latency.labels(run, phase, quantile).set(value)
                    self._remember(run, "churn_latency", (run, phase, quantile))
        for kind, count in leaks.items():
            self.churn_leaks.labels(run, kind).set(count)
            self._remember(run, "churn_leaks", (run, kind))
        for component, value in memory:
            self.churn_memory.labels(run, component).set(value)
            self._remember(run, "churn_memory", (run, component))

    def record_database_run(self, run: str, scale: int, mode: str, clients: int, tps: float,
                            latency_average: float | None, latency_stddev: float | None, wal_bytes: int | None,
                            failed: int | None) -> None:
        """One measured pgbench run (latency in seconds)."""
        labels = (run, str(scale), mode, str(clients))
        for name, gauge, value in (("database_tps", self.database_tps, tps),
                                   ("database_latency_average", self.database_latency_average, latency_average),
                                   ("database_latency_stddev", self.database_latency_stddev, latency_stddev),
                                   ("database_wal", self.database_wal, wal_bytes),
                                   ("database_failed", self.database_failed, failed)):
            if value is not None:
                gauge.labels(*labels).set(value)
                self._remember(run, name, labels)

    def record_database_initialize(self, run: str, scale: int, seconds: float) -> None:
        self.database_initialize.labels(run, str(scale)).set(seconds)
        self._remember(run, "database_initialize", (run, str(scale)))

    def record_modify(self, run: str, when: str, iops: float, bytes_per_second: float) -> None:
        """fio on the volumes before or after the class change (read and write together)."""
        for name, gauge, value in (("modify_iops", self.modify_iops, iops),
                                   ("modify_bandwidth", self.modify_bandwidth, bytes_per_second)):
            gauge.labels(run, when).set(value)
            self._remember(run, name, (run, when))

    def record_shared(self, run: str, phase: str, rate: float | None, quantiles: dict[str, float]) -> None:
        """One measured phase of the shared-volume probe (latency quantiles in seconds)."""
        if rate is not None:
            self.shared_rate.labels(run, phase).set(rate)
            self._remember(run, "shared_rate", (run, phase))
        for quantile, value in quantiles.items():
            self.shared_latency.labels(run, phase, quantile).set(value)
            self._remember(run, "shared_latency", (run, phase, quantile))

    def record_disruption(self, run: str, index: int, result: dict[str, Any]) -> None:
        """One disruption's figures once its step ended (``result``: its status.disruptions entry as JSON)."""
        state = result.get("state")
        if state not in ("Recovered", "NotRecovered"):
            return  # never injected: nothing was measured
        figures = {name: result.get(name) for name in DISRUPTION_FIGURES}
        figures["recovered"] = 1.0 if state == "Recovered" else 0.0
        for figure, value in figures.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                labels = (run, str(index), str(result.get("step", "")), str(result.get("kind", "")), figure)
                self.disruption.labels(*labels).set(float(value))
                self._remember(run, "disruption", labels)

    def record_leaks(self, run: str, leaks: dict[str, Any]) -> None:
        """The run's status.leaks as JSON, once its cleanup was audited."""
        for figure in ("volumes", "snapshots", "leaked", "repeatedOperations"):
            value = leaks.get(figure)
            if isinstance(value, int) and not isinstance(value, bool):
                labels = (run, str(leaks.get("source", "")), figure)
                self.leaked.labels(*labels).set(float(value))
                self._remember(run, "leaked", labels)

    def set_phase(self, run: str, phase: str) -> None:
        with self._lock:
            previous = self._phases.get(run)
            self._phases[run] = phase
        if previous != phase:
            if previous is not None:
                self.runs.labels(previous).dec()
            self.runs.labels(phase).inc()
        if previous is None:  # a run the operator knows has a throttling counter, 0 until its client waits
            self.throttled.labels(run)
            self._remember(run, "throttled", (run,))

    def set_verdict(self, run: str, verdict: str, broken: int) -> None:
        for value in VERDICTS:
            self.verdict.labels(run, value).set(1 if value == verdict else 0)
            self._remember(run, "verdict", (run, value))
        self.thresholds_broken.labels(run).set(broken)
        self._remember(run, "thresholds_broken", (run,))

    def set_suite_progress(self, suite: str, done: int, total: int) -> None:
        for state, value in (("done", done), ("total", total)):
            self.suite_runs.labels(suite, state).set(value)
            self._remember(f"suite {suite}", "suite_runs", (suite, state))

    def record_suite_cell(self, suite: str, cell: str, values: dict[str, str], step: str, throughput: float) -> None:
        labels = (suite, cell, step, *(values.get(axis, "") for axis in SUITE_AXIS_LABELS))
        self.suite_cell_throughput.labels(*labels).set(throughput)
        self._remember(f"suite {suite}", "suite_cell_throughput", labels)

    def set_schedule(self, schedule: str, verdict: str | None, last_time: float | None) -> None:
        if verdict is not None:
            for value in VERDICTS:
                self.schedule_verdict.labels(schedule, value).set(1 if value == verdict else 0)
                self._remember(f"schedule {schedule}", "schedule_verdict", (schedule, value))
        if last_time is not None:
            self.schedule_last_time.labels(schedule).set(last_time)
            self._remember(f"schedule {schedule}", "schedule_last_time", (schedule,))

    def forget_schedule(self, schedule: str) -> None:
        self.forget_run(f"schedule {schedule}")

    def forget_suite(self, suite: str) -> None:
        """The suite was deleted (its series are kept apart from a run's of the same name)."""
        self.forget_run(f"suite {suite}")

    def count_request(self, verb: str, path: str, code: int) -> None:
        self.api_requests.labels(verb, resource_of(path), str(code)).inc()

    def add_throttle(self, run: str, seconds: float) -> None:
        if seconds > 0:
            self.throttled.labels(run).inc(seconds)
            self._remember(run, "throttled", (run,))

    def forget_run(self, run: str) -> None:
        """The run (or suite) was deleted: its series disappear."""
        with self._lock:
            series = self._series.pop(run, set())
            phase = self._phases.pop(run, None)
        metrics = {"object_latency": self.object_latency, "step_duration": self.step_duration,
                   "step_throughput": self.step_throughput, "step_objects": self.step_objects,
                   "throttled": self.throttled, "datapath_bandwidth": self.datapath_bandwidth,
                   "datapath_iops": self.datapath_iops, "datapath_latency": self.datapath_latency,
                   "datapath_duration": self.datapath_duration, "database_tps": self.database_tps,
                   "database_latency_average": self.database_latency_average,
                   "database_latency_stddev": self.database_latency_stddev, "database_wal": self.database_wal,
                   "database_failed": self.database_failed, "database_initialize": self.database_initialize,
                   "step_phase_latency": self.step_phase_latency, "step_collected": self.step_collected,
                   "density_latency": self.density_latency,
                   "density_attach": self.density_attach,
                   "density_throughput": self.density_throughput, "density_detach": self.density_detach,
                   "churn_throughput": self.churn_throughput, "churn_latency": self.churn_latency,
                   "churn_leaks": self.churn_leaks, "churn_memory": self.churn_memory,
                   "modify_iops": self.modify_iops, "modify_bandwidth": self.modify_bandwidth,
                   "shared_rate": self.shared_rate, "shared_latency": self.shared_latency,
                   "verdict": self.verdict, "thresholds_broken": self.thresholds_broken,
                   "disruption": self.disruption, "leaked": self.leaked,
                   "suite_runs": self.suite_runs, "suite_cell_throughput": self.suite_cell_throughput,
                   "schedule_verdict": self.schedule_verdict, "schedule_last_time": self.schedule_last_time}
        for name, labels in series:
            with contextlib.suppress(KeyError):
                metrics[name].remove(*labels)
        if phase is not None:
            self.runs.labels(phase).dec()


METRICS = Metrics()


def serve(port: int) -> None:
    """Serve /metrics on all interfaces in a background thread."""
    start_http_server(port)
