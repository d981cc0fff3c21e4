"""Verdicts on the local cluster: the API server's CEL refuses thresholds that cannot be judged; a run on a class
the simulator makes slower than a bound measures, Succeeds and fails its verdict (condition, printer column,
``csibench gate`` exit 1, one failing JUnit testcase), and the same run on a fast class passes with exit 0."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from kubernetes.client.exceptions import ApiException

from localcluster.kube import Kube, present
from localcluster.launcher import REPO_ROOT, LocalCluster
from localcluster.operator_process import OperatorProcess
from localcluster.runs import GROUP, PLURAL, TERMINAL, VERSION, benchmark_run, leftovers, wait_for_phase
from tests.support.cluster import cli
from tests.support.runs import create_run

pytestmark = pytest.mark.integration
BOUND = {"step": "createVolume", "metric": "latencyP50", "max": 1.5}


def _gate(cluster: LocalCluster, namespace: str, name: str, junit: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(cluster.config.kubeconfig)}
    return subprocess.run([sys.executable, "-m", "csibench", "gate", f"{namespace}/{name}", "--timeout", "240",
                           "--interval", "0.5", "--junit", str(junit)],
                          capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300)


@pytest.mark.parametrize(("threshold", "fields", "words"), [
    ({"step": "publish", "metric": "latencyP99", "max": 1}, {"steps": ["createVolume", "deleteVolume"]},
     "a threshold names a step this run does not run"),
    ({"step": "createSnapshot", "metric": "latencyP99", "max": 1}, {},
     "a threshold names a step this run does not run"),
    ({"step": "createVolume", "metric": "latencyP99", "max": -1}, {}, "should be greater than or equal to 0"),
    ({"step": "createVolume", "metric": "speed", "max": 1}, {}, 'Unsupported value: "speed"'),
    ({"step": "createVolume", "metric": "tps", "min": 1}, {}, "a step threshold's metric is one of"),
    ({"workload": "seqRead", "metric": "mibps", "min": 1}, {},
     "a threshold names a data-path workload this run does not run"),
])
def test_thresholds_that_cannot_be_judged_are_refused_at_admission(kube: Kube, namespace: str, crd: None,
                                                                   threshold: dict[str, Any], fields: dict[str, Any],
                                                                   words: str) -> None:
    body = benchmark_run("bounded", storageClassName="csibench-sim", volumes=1, thresholds=[threshold], **fields)
    with pytest.raises(ApiException) as refused:
        create_run(kube, namespace, body)
    assert refused.value.status == 422, refused.value.body
    assert words in json.loads(present(refused.value.body))["message"]


def test_a_slow_class_breaks_its_bound_and_the_gate_says_so_a_fast_one_passes(
        kube: Kube, namespace: str, cluster: LocalCluster, operator: OperatorProcess, storage_class: Any,
        tmp_path: Path) -> None:
    slow = storage_class(createVolumeLatency="3s")
    bounds = [BOUND, {"step": "deleteVolume", "metric": "failed", "max": 0}]
    for name, cls in (("slow", slow), ("fast", "csibench-sim")):
        create_run(kube, namespace, benchmark_run(name, storageClassName=cls, volumes=2, thresholds=bounds,
                                                  steps=["createVolume", "deleteVolume"]))
    slow_gate = _gate(cluster, namespace, "slow", tmp_path / "slow.xml")
    fast_gate = _gate(cluster, namespace, "fast", tmp_path / "fast.xml")
    runs = {name: wait_for_phase(kube, namespace, name, TERMINAL, 30) for name in ("slow", "fast")}
    context = (runs, operator.log())

    slow_run = runs["slow"]["status"]
    assert slow_run["phase"] == "Succeeded" and slow_run["verdict"] == "Fail", context
    condition = next(c for c in slow_run["conditions"] if c["type"] == "ThresholdsMet")
    assert condition["status"] == "False" and condition["reason"] == "ThresholdsBroken", condition
    assert "createVolume latencyP50" in condition["message"] and " s > 1.5 s (max)" in condition["message"]
    assert slow_gate.returncode == 1, (slow_gate.stdout, slow_gate.stderr)
    assert slow_gate.stdout.startswith(f"FAIL {namespace}/slow: 1 of 2 thresholds broken")
    suite = ElementTree.parse(tmp_path / "slow.xml").getroot()
    failing = [c.get("name") for c in suite.findall("testcase") if c.find("failure") is not None]
    assert failing == ["createVolume latencyP50 <= 1.5"], ElementTree.tostring(suite)

    fast_run = runs["fast"]["status"]
    assert fast_run["phase"] == "Succeeded" and fast_run["verdict"] == "Pass", context
    assert fast_gate.returncode == 0, (fast_gate.stdout, fast_gate.stderr)
    assert fast_gate.stdout.startswith(f"PASS {namespace}/fast: all 2 thresholds met")
    assert ElementTree.parse(tmp_path / "fast.xml").getroot().get("failures") == "0"

    header, *lines = cluster.kubectl("get", "benchmarkruns", "-n", namespace).splitlines()  # the printer column
    column = header.index("VERDICT")  # columns are aligned; an empty one (Step, when the run ended) has no word
    assert {line.split()[0]: line[column:].split()[0] for line in lines} == {"fast": "Pass", "slow": "Fail"}, \
        (header, lines)
    for run in runs.values():
        assert leftovers(kube, run) == {}


def test_a_sixteen_fold_slowdown_is_a_regression_and_the_same_class_is_not(
        kube: Kube, namespace: str, cluster: LocalCluster, operator: OperatorProcess, storage_class: Any) -> None:
    """Three runs of 4 volumes, repeat 5: the baseline on a class whose creates take 0.1 s, the same class again
    (no regression: equivalent or inconclusive, as the spread decides) and a class 16x slower (1.6 s: a
    regression), one after the other so none measures beside another."""
    fast, slow = storage_class(createVolumeLatency="100ms"), storage_class(createVolumeLatency="1600ms")
    shape = {"volumes": 4, "repeat": 5, "steps": ["createVolume", "deleteVolume"]}
    runs: dict[str, dict[str, Any]] = {}
    for name, cls, baseline in (("base", fast, None), ("same", fast, "base"), ("slower", slow, f"{namespace}/base")):
        extra = {"baseline": baseline} if baseline else {}
        body = benchmark_run(name, storageClassName=cls, **shape, **extra)
        body["metadata"]["labels"] = {"series": namespace}  # csibench history lists them below
        create_run(kube, namespace, body)
        runs[name] = wait_for_phase(kube, namespace, name, TERMINAL, 300)
        assert runs[name]["status"]["phase"] == "Succeeded", (runs[name]["status"], operator.log())

    slower = runs["slower"]["status"]
    rows = {row["subject"]: row for row in slower["baseline"]["rows"]}
    assert rows["createVolume"]["change"] == "Regression", slower["baseline"]
    # 16x is the array's create latency; the step also holds the control plane's own time per claim (binding,
    # the provisioner's calls), the same on both classes and longer on a busy machine, so the measured ratio is
    # smaller (0.06-0.15 seen on a quiet machine, 0.37 beside two CPU-bound processes)
    assert rows["createVolume"]["ratio"] < 1 / 2, rows["createVolume"]
    assert slower["baseline"]["change"] == "Regression" and slower["verdict"] == "Fail"
    gated = _gate(cluster, namespace, "slower", Path(os.devnull))
    assert gated.returncode == 1 and "a regression against" in gated.stdout, (gated.stdout, gated.stderr)

    same = runs["same"]["status"]
    changes = {row["subject"]: row["change"] for row in same["baseline"]["rows"]}
    assert set(changes) == {"createVolume", "deleteVolume"}, same["baseline"]
    assert "Regression" not in changes.values(), same["baseline"]
    inconclusive = [row for row in same["baseline"]["rows"] if row["change"] == "Inconclusive"]
    # an inconclusive row says what would decide it: about N iterations, or more than a run can have
    assert all("iterations per run would" in row["message"] and row["iterationsNeeded"] for row in inconclusive), \
        inconclusive
    condition = next(c for c in same["conditions"] if c["type"] == "NoRegression")
    assert condition["status"] in ("True", "Unknown") and same["verdict"] in ("Pass", "Unknown"), condition
    # history: the latest run's shape (the slow class) is a series of one; the two fast runs are another shape
    listed = cli(cluster, "history", "-n", namespace, "-l", f"series={namespace}")
    assert f"1 run, oldest first: {namespace}/slower" in listed, listed
    assert "2 matched runs left out: not Succeeded, or of another shape than the latest" in listed, listed
    for run in runs.values():
        assert leftovers(kube, run) == {}


SHAPES: list[dict[str, Any]] = [
    {}, {"volumeSnapshotClassName": "snap"},
    {"volumeSnapshotClassName": "snap", "dataPath": {"verify": True}},
    {"dataPath": {}}, {"database": {}}, {"expand": {"by": "1Gi"}}, {"move": {}},
    {"density": {"volumesPerNode": [1]}}, {"groupSnapshot": {"volumeGroupSnapshotClassName": "group"}},
    {"steps": ["createVolume", "publish", "unpublish", "deleteVolume"]},
]


@pytest.mark.parametrize("shape", SHAPES, ids=[",".join(s) or "default" for s in SHAPES])
def test_the_api_servers_reading_of_which_steps_run_is_the_operators(kube: Kube, namespace: str, crd: None,
                                                                     shape: dict[str, Any]) -> None:
    """For every step, a threshold on it is admitted by the CRD's CEL exactly when the models' runs_step (held
    against the plan by a unit test) says the step runs: server-side dry runs, nothing is created."""
    from csibench.api.models import BenchmarkRunSpec, StepName

    admitted: dict[str, bool] = {}
    expected: dict[str, bool] = {}
    for step in StepName:
        threshold = {"step": str(step), "metric": "durationSeconds", "max": 100}
        spec = {"storageClassName": "csibench-sim", "volumes": 1, "thresholds": [threshold], **shape}
        expected[str(step)] = BenchmarkRunSpec.model_validate({**spec, "thresholds": []}).runs_step(str(step))
        try:
            kube.custom.create_namespaced_custom_object("csibench.io", "v1alpha1", namespace, "benchmarkruns",
                                                        benchmark_run(f"dry-{len(admitted)}", **spec), dry_run="All")
            admitted[str(step)] = True
        except ApiException as error:
            assert error.status == 422, error.body
            assert "a threshold names a step this run does not run" in json.loads(present(error.body))["message"]
            admitted[str(step)] = False
    assert admitted == expected


def test_a_baseline_in_another_namespace_is_compared_only_once_shared_there(
        kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    """Issue 41 (confused deputy): the operator reads the baseline with its own rights, so a run compares against
    another namespace's run only once that run's annotation shares it with the run's namespace; before that the run
    says the same whether the baseline exists or not."""
    other = f"{namespace[:55]}-base"
    kube.core.create_namespace({"metadata": {"name": other, "labels": {"csibench.io/test": "true"}}})  # type: ignore[arg-type]  # the client validates a dict body
    shape = {"storageClassName": "csibench-sim", "volumes": 2, "steps": ["createVolume", "deleteVolume"]}
    try:
        create_run(kube, namespace, benchmark_run("before", baseline=f"{other}/base", **shape))
        before = wait_for_phase(kube, namespace, "before", TERMINAL, 120)["status"]
        create_run(kube, other, benchmark_run("base", **shape))
        assert wait_for_phase(kube, other, "base", TERMINAL, 120)["status"]["phase"] == "Succeeded", operator.log()
        create_run(kube, namespace, benchmark_run("unshared", baseline=f"{other}/base", **shape))
        unshared = wait_for_phase(kube, namespace, "unshared", TERMINAL, 120)["status"]
        for status in (before, unshared):
            assert status["phase"] == "Succeeded" and status["verdict"] == "Unknown", (status, operator.log())
            assert status["baseline"]["change"] == "Inconclusive" and not status["baseline"].get("rows")
        assert before["baseline"]["message"] == unshared["baseline"]["message"], (before, unshared)
        assert "not found or not shared with namespace" in unshared["baseline"]["message"]

        kube.custom.patch_namespaced_custom_object(GROUP, VERSION, other, PLURAL, "base", {"metadata": {
            "annotations": {"csibench.io/shared-as-baseline": f"someone-else,{namespace}"}}})
        create_run(kube, namespace, benchmark_run("shared", baseline=f"{other}/base", **shape))
        shared = wait_for_phase(kube, namespace, "shared", TERMINAL, 120)["status"]
        assert shared["phase"] == "Succeeded", (shared, operator.log())
        subjects = {row["subject"] for row in shared["baseline"]["rows"]}
        assert subjects == {"createVolume", "deleteVolume"}, shared["baseline"]
        assert not shared["baseline"].get("shapeDifferences"), shared["baseline"]
        # the same baseline against a run of another shape that requires an equal one: refused, the part named
        create_run(kube, namespace, benchmark_run("wider", baseline=f"{other}/base", baselineRequireSameShape=True,
                                                  **{**shape, "volumes": 3}))
        wider = wait_for_phase(kube, namespace, "wider", TERMINAL, 120)["status"]
        assert wider["phase"] == "Succeeded" and wider["verdict"] == "Unknown", (wider, operator.log())
        assert wider["baseline"]["shapeDifferences"] == ["volumes 2 vs 3"] and not wider["baseline"].get("rows")
        assert "baselineRequireSameShape" in wider["baseline"]["message"], wider["baseline"]
    finally:
        kube.core.delete_namespace(other)
