"""A run touches only what it created: injected names, edited specs, tampered status and namesakes.

Each test puts a victim next to the run (a namespace with a ConfigMap, or a user's PVC with the run's object
name) and checks that it survives whatever the run, its spec or its status say.
"""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from localcluster.kube import Kube, present, wait_until
from localcluster.operator_process import OperatorProcess
from localcluster.runs import (
    GROUP,
    PLURAL,
    TERMINAL,
    VERSION,
    benchmark_run,
    create_run,
    get_run,
    leftovers,
    run_to_end,
    step,
    unique,
    wait_for_phase,
    wait_until_nothing_left,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def victim(kube: Kube) -> Iterator[str]:
    """A namespace the runs did not create, holding a ConfigMap that must survive every test."""
    name = unique("victim")
    kube.core.create_namespace({"metadata": {"name": name, "labels": {"csibench.io/test": "true"}}})  # type: ignore[arg-type]  # the client validates a dict body
    kube.core.create_namespaced_config_map(name, {"metadata": {"name": "precious"}, "data": {"k": "v"}})  # type: ignore[arg-type]  # the client validates a dict body
    yield name
    kube.core.delete_namespace(name)


def assert_intact(kube: Kube, namespace: str) -> None:
    found = kube.core.read_namespace(namespace)
    assert present(found.metadata).deletion_timestamp is None, f"namespace {namespace} is being deleted"
    assert kube.core.read_namespaced_config_map("precious", namespace).data == {"k": "v"}


def delete_run(kube: Kube, namespace: str, name: str) -> None:
    kube.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    wait_until(lambda: get_run(kube, namespace, name) is None, 90, f"run {name} gone (its finalizer released)")


def rejection(kube: Kube, namespace: str, body: dict[str, Any]) -> str:
    with pytest.raises(ApiException) as rejected:
        create_run(kube, namespace, body)
    assert rejected.value.status == 422, rejected.value.body
    message: str = json.loads(present(rejected.value.body))["message"]
    return message


@pytest.mark.parametrize("suffix", ["#", "?x=", "/../default"])
def test_injected_target_namespaces_are_refused_at_admission(kube: Kube, namespace: str, victim: str,
                                                             operator: OperatorProcess, suffix: str) -> None:
    message = rejection(kube, namespace, benchmark_run("inject", storageClassName="csibench-sim",
                                                       targetNamespace=victim + suffix, volumes=1))
    assert "spec.targetNamespace" in message
    assert_intact(kube, victim)


@pytest.mark.parametrize(("spec", "field"), [
    ({"targetNamespace": ".."}, "spec.targetNamespace"),
    ({"storageClassName": "csibench-sim?x="}, "spec.storageClassName"),
    ({"storageClassName": "csibench-sim#"}, "spec.storageClassName"),
    ({"volumeSnapshotClassName": "csibench-sim-snapclass?x="}, "spec.volumeSnapshotClassName"),
    # The operator would ask them with its own network identity: a cloud's instance metadata (credentials).
    ({"collect": {"prometheusUrl": "http://169.254.169.254/latest/meta-data"}}, "spec.collect.prometheusUrl"),
    ({"collect": {"prometheusUrl": "http://2852039166/"}}, "spec.collect.prometheusUrl"),
    ({"collect": {"prometheusUrl": "http://metadata.google.internal/"}}, "spec.collect.prometheusUrl"),
    ({"collect": {"prometheusUrl": "http://METADATA.GOOGLE.INTERNAL/"}}, "spec.collect.prometheusUrl"),
    ({"collect": {"prometheusUrl": "http://0251.0376.0251.0376/"}}, "spec.collect.prometheusUrl"),
])
def test_names_that_would_change_a_url_are_refused_at_admission(kube: Kube, namespace: str, crd: None,
                                                                spec: dict[str, Any], field: str) -> None:
    assert field in rejection(kube, namespace, benchmark_run("inject", **{"storageClassName": "csibench-sim",
                                                                          **spec}))


@pytest.mark.parametrize("url", ["http://metadata.monitoring:9090", "http://0xcafe.example.com/",
                                 "http://10.0.0.100:9090/prom", "https://prometheus-0.monitoring/"])
def test_prometheus_urls_that_only_look_like_metadata_are_admitted(kube: Kube, namespace: str, crd: None,
                                                                  url: str) -> None:
    """The API server's CEL agrees with the models: a Service named metadata.monitoring is not the metadata service
    (a server-side dry run: admission only, nothing stored)."""
    body = benchmark_run("admitted", storageClassName="csibench-sim", collect={"prometheusUrl": url})
    kube.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body, dry_run="All")


def test_the_spec_cannot_be_edited_once_the_run_exists(kube: Kube, namespace: str, victim: str,
                                                       operator: OperatorProcess) -> None:
    """Dropping targetNamespace from a finished run once made its deletion delete that namespace."""
    run = run_to_end(kube, namespace, benchmark_run("edited", storageClassName="csibench-sim", volumes=2,
                                                    targetNamespace=victim, steps=["createVolume", "deleteVolume"]))
    assert run["status"]["phase"] == "Succeeded", run["status"]
    for patch in ({"spec": {"targetNamespace": None}}, {"spec": {"storageClassName": "other"}},
                  {"spec": {"volumes": 40}}, {"spec": {"cleanup": "Never"}}):
        with pytest.raises(ApiException) as refused:
            kube.custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "edited", patch)
        assert refused.value.status == 422
        assert "spec is immutable" in json.loads(present(refused.value.body))["message"]
    delete_run(kube, namespace, "edited")
    assert_intact(kube, victim)


def test_editing_a_running_run_is_refused_and_the_run_keeps_its_spec(kube: Kube, namespace: str,
                                                                     operator: OperatorProcess,
                                                                     storage_class: Any) -> None:
    slow = storage_class(latency="200ms", concurrency="2")
    create_run(kube, namespace, benchmark_run("running", storageClassName=slow, volumes=16,
                                              steps=["createVolume", "deleteVolume"]))
    wait_until(lambda: ((get_run(kube, namespace, "running") or {}).get("status") or {}).get("currentStep"), 60,
               "the run under way")
    with pytest.raises(ApiException) as refused:
        kube.custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "running",
                                                   {"spec": {"volumes": 40, "cleanup": "Never"}})
    assert "create a new BenchmarkRun" in json.loads(present(refused.value.body))["message"]
    run = wait_for_phase(kube, namespace, "running", TERMINAL, 120)
    assert run["status"]["phase"] == "Succeeded" and step(run, "createVolume")["objects"] == 16
    assert run["metadata"]["generation"] == 1 and leftovers(kube, run) == {}


def test_a_tampered_status_cannot_make_deletion_remove_another_namespace(kube: Kube, namespace: str, victim: str,
                                                                         operator: OperatorProcess) -> None:
    run = run_to_end(kube, namespace, benchmark_run("tampered", storageClassName="csibench-sim", volumes=2,
                                                    steps=["createVolume"], cleanup="Never"))
    assert run["status"]["phase"] == "Succeeded", run["status"]
    own = run["status"]["ownedNamespace"]
    assert own == run["status"]["targetNamespace"]
    kube.custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, "tampered",
        {"status": {"targetNamespace": victim, "ownedNamespace": victim}})
    delete_run(kube, namespace, "tampered")
    assert_intact(kube, victim)
    # The namespace the run did create is still found (by the run's identity and label) and removed.
    wait_until_nothing_left(kube, run, 60, "the run's own namespace and volumes gone")


def test_a_user_object_with_the_runs_name_is_never_counted_or_deleted(kube: Kube, namespace: str,
                                                                       operator: OperatorProcess) -> None:
    """Creates that meet 'already exists' must prove the object is the run's before counting it as created."""
    body = benchmark_run("namesake", storageClassName="csibench-sim", volumes=2, targetNamespace=namespace,
                         steps=["createVolume", "deleteVolume"])
    created = create_run(kube, namespace, body)
    # Race the operator to the run's first claim name (the names are deterministic).
    name = f"namesake-{created['metadata']['uid'][:5]}-v00000"
    try:
        kube.core.create_namespaced_persistent_volume_claim(namespace, {  # type: ignore[arg-type]  # the client validates a dict body
            "metadata": {"name": name}, "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "csibench-sim",
                                                 "resources": {"requests": {"storage": "1Gi"}}}})
    except ApiException as error:
        if error.status != 409:
            raise
        pytest.fail("the operator created its claim before the test could: rerun (timing)")
    run = wait_for_phase(kube, namespace, "namesake", TERMINAL, 120)
    create = step(run, "createVolume")
    assert (create["succeeded"], create["failed"]) == (1, 1), create
    assert create["failureReasons"][0]["reason"] == "NameConflict", create
    delete = step(run, "deleteVolume")
    assert (delete["succeeded"], delete["skipped"]) == (1, 1), delete
    user = kube.core.read_namespaced_persistent_volume_claim(name, namespace)
    assert present(user.metadata).deletion_timestamp is None and not (present(user.metadata).labels or {})
    assert "removed every object" in run["status"]["cleanup"], run["status"]
    kube.core.delete_namespaced_persistent_volume_claim(name, namespace)  # the user's; leftovers() goes by name
    wait_until_nothing_left(kube, run, 60, "nothing of the run left")


def test_a_step_is_running_in_status_before_its_first_object_exists(kube: Kube, namespace: str,
                                                                    operator: OperatorProcess,
                                                                    storage_class: Any) -> None:
    """A restart must know which step it interrupted: the status write comes before the first request."""
    slow = storage_class(latency="300ms", concurrency="1")
    name = unique("announce")
    seen: dict[str, Any] = {}

    def first_claim() -> None:
        stream = watch.Watch()  # type: ignore[no-untyped-call]  # kubernetes' watch module is untyped
        for event in stream.stream(  # type: ignore[no-untyped-call]  # kubernetes' watch module is untyped
                kube.core.list_persistent_volume_claim_for_all_namespaces,
                label_selector="csibench.io/run=" + name, timeout_seconds=60):
            if event["type"] == "ADDED":
                seen["run"] = get_run(kube, namespace, name)
                operator.stop(signal.SIGKILL)
                stream.stop()  # type: ignore[no-untyped-call]  # kubernetes' watch module is untyped

    watcher = threading.Thread(target=first_claim)
    watcher.start()
    create_run(kube, namespace, benchmark_run(name, storageClassName=slow, volumes=10, restartPolicy="Fail",
                                              steps=["createVolume", "deleteVolume"]))
    watcher.join(70)
    operator.start()
    assert seen, "no claim of the run appeared"
    assert step(seen["run"], "createVolume")["state"] == "Running", seen["run"]["status"]
    run = wait_for_phase(kube, namespace, name, TERMINAL, 120)
    status = run["status"]
    assert step(run, "createVolume")["state"] == "Interrupted", status
    assert (status["phase"], status["conditions"][0]["reason"]) == ("Failed", "OperatorRestarted"), status
    assert "during step createVolume" in status["conditions"][0]["message"]
    wait_until_nothing_left(kube, run, 60, "nothing of the run left")
