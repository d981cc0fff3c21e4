"""BenchmarkSuite on the local cluster: runs in the documented order, one at a time, through operator kills; the
scaling curve against the array's model; deletion mid-suite; what admission refuses."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from csibench.api.suite_results import cell_results, pooled_run
from csibench.report.suite import machinery_table, suite_comparisons, view_of
from localcluster.kube import Kube, json_object, present, wait_until
from localcluster.launcher import LocalCluster
from localcluster.operator_process import OPERATOR_SA, OperatorProcess
from localcluster.runs import (
    GROUP,
    POPULATION_LABEL,
    VERSION,
    create_run,
    describe_stuck_run,
    get_run,
    leftovers,
    population_leftovers,
    wait_until_nothing_left,
)

pytestmark = pytest.mark.integration
SUITES = "benchmarksuites"
RUNS = "benchmarkruns"
TERMINAL = {"Succeeded", "Failed"}
QUICK = {"volumes": 2, "steps": ["createVolume", "deleteVolume"], "preflight": "Skip"}


def benchmark_suite(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "BenchmarkSuite", "metadata": {"name": name}, "spec": spec}


def create_suite(kube: Kube, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    return create_run(kube, namespace, body, SUITES)


def get_suite(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    return get_run(kube, namespace, name, SUITES)


def suite_runs(kube: Kube, namespace: str, suite: dict[str, Any]) -> list[dict[str, Any]]:
    listed = kube.custom.list_namespaced_custom_object(
        GROUP, VERSION, namespace, RUNS, label_selector=f"csibench.io/suite-uid={suite['metadata']['uid']}")
    return [json_object(item) for item in json_object(listed)["items"]]


def describe_suite(kube: Kube, namespace: str, name: str, operator: OperatorProcess) -> str:
    """The suite's status, its current run's state and the operator's log: what a CI failure needs."""
    suite = get_suite(kube, namespace, name)
    status = (suite or {}).get("status") or {}
    current = [describe_stuck_run(kube, namespace, run) for run in (status.get("current") or "").split(", ") if run]
    shown = {key: status.get(key) for key in ("phase", "progress", "current", "message", "runs")}
    return f"suite {namespace}/{name}: {json.dumps(shown)}; current run: {current}; operator log:\n{operator.log(80)}"


def wait_for_suite(kube: Kube, namespace: str, name: str, operator: OperatorProcess,
                   timeout: float) -> dict[str, Any]:
    def ended() -> dict[str, Any] | None:
        suite = get_suite(kube, namespace, name)
        return suite if suite and (suite.get("status") or {}).get("phase") in TERMINAL else None

    try:
        return wait_until(ended, timeout, f"BenchmarkSuite {namespace}/{name} to end", interval=0.5)
    except AssertionError as error:
        raise AssertionError(f"{error}; {describe_suite(kube, namespace, name, operator)}") from None


class RunEvents:
    """Every watch event of the suite's runs, in the API server's order: what was created, and when each run
    reached a terminal phase, independent of the operator (which a test kills)."""

    def __init__(self, kube: Kube, namespace: str, suite_name: str) -> None:
        self.kube, self.namespace, self.selector = kube, namespace, f"csibench.io/suite={suite_name}"
        self.events: list[tuple[str, str, str, str]] = []  # (type, name, uid, phase)
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, daemon=True)

    def __enter__(self) -> RunEvents:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(15)

    def _follow(self) -> None:
        version = ""
        while not self._stop.is_set():
            stream = watch.Watch()  # type: ignore[no-untyped-call]  # the client is untyped
            try:
                for event in stream.stream(  # type: ignore[no-untyped-call]  # the client is untyped
                        self.kube.custom.list_namespaced_custom_object, GROUP, VERSION, self.namespace, RUNS,
                        label_selector=self.selector, resource_version=version or None, timeout_seconds=5):
                    obj = event["object"]
                    meta = obj["metadata"]
                    version = meta["resourceVersion"]
                    phase = (obj.get("status") or {}).get("phase") or ""
                    self.events.append((event["type"], meta["name"], meta["uid"], phase))
                    if self._stop.is_set():
                        break
            except ApiException as error:
                if error.status == 410:  # too old: start over (events already kept stay)
                    version = ""
                else:
                    self.errors.append(str(error))
                    time.sleep(0.5)
            except Exception as error:  # a dropped connection: watch again from the last version seen
                self.errors.append(repr(error))
                time.sleep(0.5)
            finally:
                stream.stop()  # type: ignore[no-untyped-call]  # the client is untyped

    def created(self) -> list[tuple[str, str]]:
        """(name, uid) of each run in the order the API server admitted it (a restart's re-list repeats ADDED
        for the same uid: counted once)."""
        seen: list[tuple[str, str]] = []
        for kind, name, uid, _ in self.events:
            if kind == "ADDED" and (name, uid) not in seen:
                seen.append((name, uid))
        return seen

    def overlaps(self) -> list[str]:
        """Runs created while another had not yet reached a terminal phase."""
        active: set[str] = set()
        found = []
        for kind, name, _, phase in self.events:
            if kind == "ADDED" and name not in active and phase not in TERMINAL:
                if active:
                    found.append(f"{name} created while {sorted(active)} ran")
                active.add(name)
            elif phase in TERMINAL or kind == "DELETED":
                active.discard(name)
        return found


@pytest.fixture
def two_classes(storage_class: Any) -> Iterator[tuple[str, str]]:
    yield storage_class(createVolumeLatency="100ms"), storage_class(createVolumeLatency="400ms")


def test_an_interleaved_suite_runs_in_order_one_at_a_time_and_completes_through_two_operator_kills(
        kube: Kube, namespace: str, cluster: LocalCluster, operator_as_service_account: OperatorProcess,
        two_classes: tuple[str, str]) -> None:
    """2 classes x 2 sizes x 2 rounds, Interleaved, by the operator with only its ServiceAccount's rights and the
    admission policy in force; the operator is killed twice at random moments."""
    operator = operator_as_service_account
    fast, slow = two_classes
    seed = random.randrange(1 << 30)
    pauses = random.Random(seed).sample([1.5, 3.0, 4.5, 6.0, 7.5, 9.0], 2)
    # The runs share the test's namespace (one at a time, each selecting only its own objects), so none waits
    # for a namespace of its own to be deleted (8 s each here) and the test spends its time on what it checks.
    body = benchmark_suite("classes", template={**QUICK, "targetNamespace": namespace}, repeat=2,
                           order="Interleaved",
                           matrix={"storageClassName": [fast, slow], "size": ["1Gi", "2Gi"]})
    with RunEvents(kube, namespace, "classes") as events:
        create_suite(kube, namespace, body)
        for pause in pauses:
            time.sleep(pause)
            operator.stop(signal.SIGKILL)
            operator.start()
        suite = wait_for_suite(kube, namespace, "classes", operator, 360)
        time.sleep(1)  # the last terminal event reaches the watch
    context = (f"kills after {pauses} (seed {seed}); watch errors {events.errors[-3:]}; "
               f"{describe_suite(kube, namespace, 'classes', operator)}")
    status = suite["status"]
    assert status["phase"] == "Succeeded", context
    expected = [f"classes-c{cell}-r{round_}" for round_ in (1, 2) for cell in range(4)]
    created = events.created()
    assert [name for name, _ in created] == expected, context  # the documented order, each name once
    assert len({uid for _, uid in created}) == 8, context  # no cell started twice (a second uid for a name)
    assert events.overlaps() == [], context  # never two at once
    assert [run["name"] for run in status["runs"]] == expected and status["progress"] == "8/8", context
    assert all(run["phase"] == "Succeeded" for run in status["runs"]), context
    assert [cell["values"] for cell in status["cells"]] == [
        {"storageClassName": fast, "size": "1Gi"}, {"storageClassName": fast, "size": "2Gi"},
        {"storageClassName": slow, "size": "1Gi"}, {"storageClassName": slow, "size": "2Gi"}], context
    runs = suite_runs(kube, namespace, suite)
    for run in runs:
        assert run["metadata"]["ownerReferences"][0]["uid"] == suite["metadata"]["uid"]
        assert run["spec"]["storageClassName"] in (fast, slow) and run["spec"]["volumes"] == 2
    # The rounds are each cell's samples: two per cell, and a comparison of two cells reads them as iterations.
    results = {result.cell: result for result in cell_results(suite, runs)}
    assert [len(results[c].steps["createVolume"].throughputs) for c in ("c0", "c1", "c2", "c3")] == [2, 2, 2, 2]
    pooled = pooled_run(suite, results["c2"])
    (aggregate,) = [a for a in pooled["status"]["aggregates"] if a["name"] == "createVolume"]
    assert aggregate["iterations"] == 2 and aggregate["throughputs"] == results["c2"].steps["createVolume"].throughputs
    by_class = [c for c in suite_comparisons(suite, runs) if c.axis == "storageClassName"]
    assert {(c.cell_a, c.cell_b) for c in by_class} == {("c0", "c2"), ("c1", "c3")}, context
    assert all((c.judged.n_a, c.judged.n_b) == (2, 2) for c in by_class), by_class
    env = {**os.environ, "KUBECONFIG": str(cluster.config.kubeconfig)}
    report = subprocess.run([sys.executable, "-m", "csibench", "report", "--suite", f"{namespace}/classes"],
                            env=env, capture_output=True, text=True, timeout=60)
    assert report.returncode == 0 and "n = 2 per side" in report.stdout, report.stdout + report.stderr


def test_a_scaling_suite_draws_the_array_model_flat_on_a_serial_class_and_growing_on_an_unlimited_one(
        kube: Kube, namespace: str, operator: OperatorProcess, storage_class: Any) -> None:
    """createVolume of N volumes: a serial array (concurrency 1, 1.5 s per volume) does 1/1.5 volumes/s whatever N;
    an unlimited one (8 s per volume, all at once) does N/8 volumes/s. Both within 15% of that model. The step
    also holds the control plane's own time per claim (the PV controller binds claims one by one: about 50 ms
    each here, more on a busy machine), so the array's latencies are long enough for the array to dominate."""
    serial = storage_class(concurrency="1", createVolumeLatency="1500ms", deleteVolumeLatency="0")
    unlimited = storage_class(createVolumeLatency="8s", deleteVolumeLatency="0")
    sizes = [1, 2, 4]  # at 8 the control plane's own ~190 ms per claim under two CPU burners took 16% of 8 s
    create_suite(kube, namespace, benchmark_suite(
        "scaling", template={**QUICK, "volumes": 1, "targetNamespace": namespace}, order="Sequential",
        matrix={"storageClassName": [serial, unlimited], "volumes": sizes}))
    suite = wait_for_suite(kube, namespace, "scaling", operator, 360)
    context = describe_suite(kube, namespace, "scaling", operator)
    assert suite["status"]["phase"] == "Succeeded", context
    curve = {(r.values["storageClassName"], int(r.values["volumes"])): r.steps["createVolume"].throughput
             for r in cell_results(suite, suite_runs(kube, namespace, suite))}
    model = {**{(serial, n): 1 / 1.5 for n in sizes}, **{(unlimited, n): n / 8.0 for n in sizes}}
    off = {key: f"{curve[key]} vs model {model[key]:.2f}" for key in model
           if (measured := curve[key]) is None or abs(measured / model[key] - 1) > 0.15}
    assert off == {}, f"{curve}; {context}"


def test_a_population_suite_grows_one_population_measures_its_batch_at_each_level_and_removes_it(
        kube: Kube, namespace: str, operator: OperatorProcess, cluster: LocalCluster) -> None:
    """The scale envelope in small, with one population the suite shares: a batch of 2 beside 4 claims and 2
    snapshots, then beside 8 and 4 (the first run makes 4 and 2, the second finds them and adds as many); each
    run's steps count the batch alone, the CSI components' memory is collected per level, the population outlives
    the first run, and the suite removes all of it, the seed's volume and content too, when it ends."""
    levels = [{"claims": 4, "snapshots": 2}, {"claims": 8, "snapshots": 4}]
    template = {**QUICK, "storageClassName": "csibench-sim", "targetNamespace": namespace,
                "volumeSnapshotClassName": "csibench-sim-snapclass",
                "steps": ["createVolume", "createSnapshot", "deleteSnapshot", "deleteVolume"],
                "collect": {"prometheusUrl": cluster.prometheus_url}}
    created = create_suite(kube, namespace, benchmark_suite("envelope", template=template, order="Sequential",
                                                            sharePopulation=True, matrix={"population": levels}))
    suite_uid = created["metadata"]["uid"]
    suite = wait_for_suite(kube, namespace, "envelope", operator, 360)
    context = describe_suite(kube, namespace, "envelope", operator)
    assert suite["status"]["phase"] == "Succeeded", context
    runs = sorted(suite_runs(kube, namespace, suite), key=lambda run: run["metadata"]["name"])
    made = [(run["status"]["population"]["claims"], run["status"]["population"]["snapshots"],
             run["status"]["population"].get("foundClaims"), run["status"]["population"].get("foundSnapshots"),
             [s["objects"] for s in run["status"]["steps"]]) for run in runs]
    assert made == [(4, 2, 0, 0, [2, 2, 2, 2]), (8, 4, 4, 2, [2, 2, 2, 2])], context
    for run in runs:
        population = run["status"]["population"]
        assert population["sharedBy"] == "envelope" and population["selector"] == (
            f"{POPULATION_LABEL}={suite_uid}") and "removedSeconds" not in population, population
    view = view_of(suite, runs)
    assert view.axes == [("population", ["claims=4/snapshots=2", "claims=8/snapshots=4"])], view.axes
    headers, rows = machinery_table(view) or ([], [])
    assert "csi-provisioner MiB" in headers and "csi-snapshotter MiB" in headers, (headers, context)
    assert [row[0] for row in rows] == ["c0", "c1"] and all(cell != "-" for row in rows for cell in row[2:]), rows
    for run in runs:
        wait_until_nothing_left(kube, run, 60, f"run {run['metadata']['name']}'s own objects gone")
    wait_until(lambda: (get_suite(kube, namespace, "envelope") or {}).get("status", {}).get(
        "population", {}).get("removed"), 120, f"the suite's population removed; {context}")
    assert not any(population_leftovers(kube, suite_uid).values()), population_leftovers(kube, suite_uid)
    claimed = [str(getattr(present(pv.spec).claim_ref, "name", "")) for pv in kube.core.list_persistent_volume().items]
    assert [name for name in claimed if name.startswith("pop-envelope-")] == [], "the seed's volume was left"


def test_deleting_a_suite_mid_run_removes_its_runs_and_everything_they_created(
        kube: Kube, namespace: str, operator: OperatorProcess, storage_class: Any) -> None:
    """Deleted while its first run's batch is under way, beside the population the suite shares: the runs go,
    each cleaned up by its own finalizer, and the suite's finalizer stays until the population, its seed's volume
    included, is gone."""
    slow = storage_class(createVolumeLatency="4s")
    suite = create_suite(kube, namespace, benchmark_suite(
        "doomed", template={**QUICK, "storageClassName": slow, "population": {"claims": 6}}, repeat=3,
        sharePopulation=True))
    suite_uid = suite["metadata"]["uid"]

    def running_with_claims() -> dict[str, Any] | None:
        for run in suite_runs(kube, namespace, suite):
            target = (run.get("status") or {}).get("targetNamespace")
            if target and kube.core.list_namespaced_persistent_volume_claim(target).items:
                return run
        return None

    try:
        child = wait_until(running_with_claims, 90, "the suite's first run to create claims", interval=0.3)
    except AssertionError as error:
        raise AssertionError(f"{error}; {describe_suite(kube, namespace, 'doomed', operator)}") from None
    assert len(population_leftovers(kube, suite_uid)["populationPvcs"]) == 6 + 1  # and the seed
    kube.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, SUITES, "doomed")
    wait_until(lambda: get_suite(kube, namespace, "doomed") is None, 90,
               f"the suite gone (its finalizer released); operator log:\n{operator.log(40)}")
    assert not any(population_leftovers(kube, suite_uid).values()), population_leftovers(kube, suite_uid)
    wait_until(lambda: not suite_runs(kube, namespace, suite), 90,
               f"the suite's runs gone; operator log:\n{operator.log(40)}", interval=0.5)
    assert get_run(kube, namespace, child["metadata"]["name"]) is None
    wait_until_nothing_left(kube, child, 90, "the deleted suite's run cleaned up")
    assert leftovers(kube, child) == {}
    assert [run for run in suite_runs(kube, namespace, suite)] == []
    volumes = [present(pv.metadata).name for pv in kube.core.list_persistent_volume().items
               if present(pv.spec).storage_class_name == slow]
    assert volumes == [], f"the seed's volume (or a run's) was left: {volumes}"


@pytest.mark.parametrize(("spec", "words"), [
    ({"template": QUICK}, "set the storage class in the template or as a matrix axis"),
    ({"template": {**QUICK, "storageClassName": "csibench-sim"}, "repeat": 5,
      "matrix": {"volumes": [1, 2, 3, 4], "size": ["1Gi", "2Gi", "3Gi", "4Gi"]}}, "at most 64 BenchmarkRuns"),
    ({"template": {**QUICK, "volumes": 0}, "matrix": {"storageClassName": ["csibench-sim"]}},
     "should be greater than or equal to 1"),
    ({"template": QUICK, "matrix": {"storageClassName": ["Not_A_Class"]}}, "should match"),
])
def test_admission_refuses_a_suite_that_cannot_run(kube: Kube, namespace: str, crd: None, spec: dict[str, Any],
                                                   words: str) -> None:
    with pytest.raises(ApiException) as refused:
        create_suite(kube, namespace, benchmark_suite("bad", **spec))
    assert refused.value.status == 422, refused.value.body
    assert words in json.loads(present(refused.value.body))["message"]


def test_a_suite_name_too_long_for_its_runs_is_refused(kube: Kube, namespace: str, crd: None) -> None:
    with pytest.raises(ApiException) as refused:
        create_suite(kube, namespace, benchmark_suite("s" * 33, template={**QUICK, "storageClassName": "x"}))
    assert refused.value.status == 422 and "at most 32 characters" in str(refused.value.body)


def test_a_cell_that_is_not_a_valid_run_fails_the_suite_before_any_run_exists(
        kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    """The template alone is fine; with volumes 1 the data path's 2 volumes do not fit: cell c1 names it."""
    template = {"volumes": 2, "preflight": "Skip", "storageClassName": "csibench-sim",
                "dataPath": {"volumes": 2, "workloads": [{"name": "seq", "pattern": "read", "blockSize": "64Ki"}]}}
    suite = create_suite(kube, namespace, benchmark_suite("halfbad", template=template,
                                                          matrix={"volumes": [2, 1]}))
    ended = wait_for_suite(kube, namespace, "halfbad", operator, 60)
    condition = ended["status"]["conditions"][0]
    assert ended["status"]["phase"] == "Failed" and condition["reason"] == "InvalidSpec", ended["status"]
    assert "cell c1 (volumes=1)" in condition["message"] and "dataPath" in condition["message"], condition
    assert suite_runs(kube, namespace, suite) == []


def test_the_operator_may_create_runs_only_as_a_suites(cluster: LocalCluster, namespace: str,
                                                      deployed: None) -> None:
    run = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "BenchmarkRun", "metadata": {"name": "stray"},
           "spec": {**QUICK, "storageClassName": "csibench-sim"}}
    answer = subprocess.run([str(cluster.binaries.kubectl), f"--kubeconfig={cluster.config.kubeconfig}",
                             f"--as={OPERATOR_SA}", "create", "--dry-run=server", "-n", namespace, "-f", "-"],
                            input=json.dumps(run), capture_output=True, text=True)
    expected = "only create a BenchmarkRun as a BenchmarkSuite's or a BenchmarkSchedule's run"
    assert answer.returncode != 0 and expected in answer.stderr, answer.stderr
