"""Preflight: flag parsing over real-world container specs, matching sidecars to a driver, the checks and what
they mean for a run (findings, condition, Enforce), with the engine against the in-memory fake API server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from csibench.api.models import BenchmarkRunSpec, Component, Machinery, PreflightMode, Severity, Toleration
from csibench.kube.client import ApiError, Json
from csibench.preflight.checks import (
    RunShape,
    client_throttling,
    group_snapshot_gate,
    operation_timeout,
    pacing_floor,
    run_checks,
    worker_threads,
)
from csibench.preflight.components import components_for, effective, kind_of
from csibench.preflight.discovery import discover_machinery
from csibench.preflight.flags import image_name_and_tag, parse_duration, parse_flags
from csibench.preflight.outcome import outcome
from csibench.report.compare import render_compare
from csibench.report.render import render_table
from tests.support.fake_kube import FakeKube
from tests.support.fake_runs import REF, run, spec

DRIVER = "hostpath.csi.k8s.io"
ALL_STEPS = ("createVolume", "publish", "unpublish", "createSnapshot", "cloneFromSnapshot", "deleteClone",
             "deleteSnapshot", "deleteVolume")


# -- flags ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("command", "args", "expected"), [
    (["/csi-provisioner"], ["--kube-api-qps=50", "--kube-api-burst=100"],
     {"kube-api-qps": "50", "kube-api-burst": "100"}),
    (["/csi-provisioner"], ["--kube-api-qps", "50", "--worker-threads", "20"],
     {"kube-api-qps": "50", "worker-threads": "20"}),
    (["/csi-attacher", "-timeout=2m", "--v=5"], [], {"timeout": "2m", "v": "5"}),
    (["sh", "-c", "exec /snapshot-controller --kube-api-qps=100 --kube-api-burst 200"], [],
     {"kube-api-qps": "100", "kube-api-burst": "200"}),
    ([], ["--leader-election", "--kube-api-qps=7"], {"leader-election": "true", "kube-api-qps": "7"}),
    ([], ["--kube-api-qps=5", "--kube-api-qps=300"], {"kube-api-qps": "300"}),
    ([], ["--feature-gates=Topology=true,CSINodeExpandSecret=true"],
     {"feature-gates": "Topology=true,CSINodeExpandSecret=true"}),
])
def test_flags_are_read_the_way_go_reads_them(command: list[str], args: list[str], expected: dict[str, str]) -> None:
    parsed = parse_flags(command, args)
    for name, value in expected.items():
        assert parsed[name] == value
    assert set(expected) <= set(parsed)


def test_env_references_are_expanded_as_the_kubelet_does() -> None:
    parsed = parse_flags(["/csi-provisioner"], ["--csi-address=$(ADDRESS)", "--timeout=$(UNKNOWN)"],
                         {"ADDRESS": "/csi/csi.sock"})
    assert parsed == {"csi-address": "/csi/csi.sock", "timeout": "$(UNKNOWN)"}


def test_go_durations() -> None:
    assert parse_duration("10s") == 10 and parse_duration("1m30s") == 90 and parse_duration("500ms") == 0.5
    assert parse_duration("5m0s") == 300 and parse_duration("0") == 0
    assert parse_duration("ten") is None and parse_duration("10") is None and parse_duration("10sx") is None


def test_image_name_and_tag() -> None:
    assert image_name_and_tag("registry.k8s.io/sig-storage/csi-provisioner:v6.4.0") == ("csi-provisioner", "v6.4.0")
    assert image_name_and_tag("localhost:5000/csi-attacher@sha256:ab") == ("csi-attacher", None)
    assert image_name_and_tag("quay.io/x/snapshot-controller:v8.7.0@sha256:ab") == ("snapshot-controller", "v8.7.0")


# -- components ----------------------------------------------------------------------------------------------------
def container(name: str, image: str = "", args: list[str] | None = None, command: list[str] | None = None,
              env: dict[str, str] | None = None) -> dict[str, Any]:
    return {"name": name, "image": image, "args": args or [], "command": command or [],
            "env": [{"name": k, "value": v} for k, v in (env or {}).items()]}


def pod(name: str, namespace: str, *containers: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"containers": list(containers)},
            "status": {"phase": "Running"}}


def hostpath_controller(driver: str = DRIVER, qps: str | None = None) -> dict[str, Any]:
    """The shape of csi-driver-host-path's controller pod: the driver container names the driver."""
    limits = [f"--kube-api-qps={qps}", f"--kube-api-burst={int(qps) * 2}"] if qps else []
    return pod(f"csi-{driver.split('.')[0]}-0", "storage",
               container("hostpath", "registry.k8s.io/sig-storage/hostpathplugin:v1.17.0",
                         ["--drivername=" + driver, "--endpoint=$(CSI_ENDPOINT)"]),
               container("csi-provisioner", "registry.k8s.io/sig-storage/csi-provisioner:v6.4.0",
                         ["-v=5", "--csi-address=/csi/csi.sock", *limits]),
               container("csi-attacher", "registry.k8s.io/sig-storage/csi-attacher:v4.13.0",
                         ["--csi-address", "/csi/csi.sock"]))


def test_components_are_recognised_by_image_name_or_binary() -> None:
    assert kind_of(container("x", "registry.k8s.io/sig-storage/csi-snapshotter:v8.7.0")) == "csi-snapshotter"
    assert kind_of(container("csi-resizer", "example.com/mirror/resizer:v1")) == "csi-resizer"
    assert kind_of(container("c", "", command=["/usr/local/bin/snapshot-controller"])) == "snapshot-controller"
    assert kind_of(container("driver", "registry.k8s.io/sig-storage/hostpathplugin:v1.17.0")) is None


def test_sidecars_of_another_driver_are_not_taken() -> None:
    pods = [hostpath_controller(DRIVER, qps="100"), hostpath_controller("other.csi.example.com", qps="7"),
            pod("snapshot-controller-5d", "kube-system",
                container("snapshot-controller", "registry.k8s.io/sig-storage/snapshot-controller:v8.7.0",
                          ["--leader-election=true"]))]
    found = components_for(pods, DRIVER)
    assert [(c.kind, c.pod) for c in found] == [("csi-provisioner", "csi-hostpath-0"),
                                                ("csi-attacher", "csi-hostpath-0"),
                                                ("snapshot-controller", "snapshot-controller-5d")]
    provisioner = found[0]
    assert provisioner.flags == {"kube-api-qps": "100", "kube-api-burst": "200"}
    assert provisioner.version == "v6.4.0" and provisioner.matchedBy == "a container of its pod names the driver"
    assert effective(provisioner, "worker-threads") == "100" and effective(provisioner, "timeout") == "10s"
    controller = found[2]
    assert effective(controller, "kube-api-qps") == "5" and controller.defaults["kube-api-burst"] == "10"


def test_a_csi_address_naming_the_driver_or_the_only_sidecar_of_its_kind_is_taken() -> None:
    by_path = pod("p1", "a", container("csi-provisioner", "csi-provisioner:v6.4.0",
                                       [f"--csi-address=/var/lib/kubelet/plugins/{DRIVER}/csi.sock"]))
    elsewhere = pod("p2", "b", container("csi-provisioner", "csi-provisioner:v6.4.0", ["--csi-address=/x/y.sock"]))
    found = components_for([by_path, elsewhere], DRIVER)
    assert [(c.pod, c.matchedBy) for c in found] == [("p1", "its --csi-address names the driver")]
    alone = components_for([elsewhere], DRIVER)
    assert [(c.pod, c.matchedBy) for c in alone] == [("p2", "the only csi-provisioner in the cluster")]


# -- checks --------------------------------------------------------------------------------------------------------
def shape(volumes: int = 200, steps: tuple[str, ...] = ALL_STEPS, **fields: Any) -> RunShape:
    base: dict[str, Any] = {"steps": steps, "volumes": volumes, "pods": volumes, "binding_mode": "Immediate",
                            "storage_class": "fast", "node_selector": {}, "tolerations": ()}
    return RunShape(**{**base, **fields})


def snapshot_controller(qps: str | None = None, burst: str | None = None) -> Component:
    flags = {k: v for k, v in (("kube-api-qps", qps), ("kube-api-burst", burst)) if v is not None}
    found = components_for([pod("snapshot-controller-0", "kube-system", container(
        "snapshot-controller", "registry.k8s.io/sig-storage/snapshot-controller:v8.7.0",
        [f"--{k}={v}" for k, v in flags.items()]))], DRIVER)
    return found[0]


VISIBLE = Machinery(visible=True, driver=DRIVER, csiDriver={"attachRequired": "true"})


def test_default_client_limits_throttle_200_snapshots_and_the_message_says_what_to_change() -> None:
    finding = client_throttling(snapshot_controller(), shape(200), VISIBLE)
    assert finding is not None and finding.severity == Severity.WARNING
    assert "snapshot-controller in kube-system runs with --kube-api-qps=5 --kube-api-burst=10" in finding.message
    assert "200 snapshots in createSnapshot" in finding.message and "paced by its client" in finding.message
    assert finding.facts["minimumSeconds"] == f"{pacing_floor(200, 9, 5, 10):.1f}" == "358.0"
    suggested = finding.message.rsplit("e.g. ", 1)[1].split()
    qps, burst = (part.split("=")[1] for part in suggested)
    following_the_advice = client_throttling(snapshot_controller(qps, burst), shape(200), VISIBLE)
    assert following_the_advice is None or following_the_advice.severity == Severity.INFO


def test_raised_limits_pass_and_a_step_the_component_is_not_on_is_not_checked() -> None:
    assert client_throttling(snapshot_controller("100", "200"), shape(20), VISIBLE) is None
    assert client_throttling(snapshot_controller(), shape(200, steps=("createVolume", "deleteVolume")),
                             VISIBLE) is None


def resizer(*args: str) -> Component:
    (found,) = components_for([pod("csi-hostpathplugin-0", "default", container(
        "csi-resizer", "registry.k8s.io/sig-storage/csi-resizer:v2.3.0", [f"--csi-address=/csi/{DRIVER}.sock",
                                                                          *args]))], DRIVER)
    return found


def test_the_resizer_is_checked_by_its_own_flags_for_an_expansion() -> None:
    expanding = shape(200, steps=("createVolume", "expandVolume", "deleteVolume"))
    default = resizer()
    throttled = client_throttling(default, expanding, VISIBLE)
    assert throttled is not None and throttled.severity == Severity.WARNING
    assert "200 volumes in expandVolume" in throttled.message and throttled.facts["requestsPerObject"] == "3"
    workers = worker_threads(default, expanding, VISIBLE)
    assert workers is not None and "Raise --workers" in workers.message and workers.facts["workers"] == "10"
    timeout = operation_timeout(default, expanding, VISIBLE)
    assert timeout is not None and "--resize-timeout=10s" in timeout.message  # its default, per ControllerExpand
    # --timeout on the command line overrides --resize-timeout (external-resizer v2.3.0's resolveOperationTimeouts)
    overridden = operation_timeout(resizer("--timeout=5m", "--resize-timeout=1s"), expanding, VISIBLE)
    assert overridden is None
    raised = resizer("--kube-api-qps=500", "--kube-api-burst=1000", "--workers=200", "--resize-timeout=2m")
    assert [check(raised, expanding, VISIBLE) for check in (client_throttling, worker_threads,
                                                            operation_timeout)] == [None, None, None]
    assert client_throttling(default, shape(200, steps=("createVolume", "deleteVolume")), VISIBLE) is None


def test_a_group_snapshot_step_with_the_gate_off_is_a_warning_that_names_the_flag() -> None:
    grouping = shape(20, steps=("createVolume", "createGroupSnapshot", "deleteGroupSnapshot", "deleteVolume"))
    current = snapshot_controller()  # v8.7.0: on by default
    assert group_snapshot_gate(current, grouping, VISIBLE) is None
    assert group_snapshot_gate(current.model_copy(update={"version": "v8.6.0"}), shape(20), VISIBLE) is None
    for off in (current.model_copy(update={"flags": {"feature-gates": "CSIVolumeGroupSnapshot=false"}}),
                current.model_copy(update={"version": "v8.6.0"})):
        found = group_snapshot_gate(off, grouping, VISIBLE)
        assert found is not None and found.severity == Severity.WARNING
        assert "--feature-gates=CSIVolumeGroupSnapshot=true" in found.message
    for said in ("CSIVolumeGroupSnapshot=true", "Other=false, CSIVolumeGroupSnapshot=T", "CSIVolumeGroupSnapshot=1"):
        on = current.model_copy(update={"version": "v8.6.0", "flags": {"feature-gates": said}})
        assert group_snapshot_gate(on, grouping, VISIBLE) is None, said


def test_a_driver_without_attach_is_not_checked_for_the_attacher() -> None:
    attacher = components_for([hostpath_controller()], DRIVER)[1]
    assert attacher.kind == "csi-attacher"
    assert client_throttling(attacher, shape(200), VISIBLE) is not None
    no_attach = Machinery(visible=True, driver=DRIVER, csiDriver={"attachRequired": "false"})
    assert client_throttling(attacher, shape(200), no_attach) is None


def ready_node(name: str, **spec_fields: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"zone": "a"}}, "spec": spec_fields,
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"pods": "110"}}}


def test_nodes_that_cannot_run_the_publish_pods_are_a_warning() -> None:
    tainted = ready_node("n1", taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}])
    cordoned = ready_node("n2", unschedulable=True)
    not_ready = {**ready_node("n3"), "status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    found = run_checks(shape(10), VISIBLE, [tainted, cordoned, not_ready])
    assert (found[0].check, found[0].severity) == ("SchedulableNodes", Severity.WARNING)
    tolerating = shape(10, tolerations=(Toleration(key="dedicated", value="db", effect="NoSchedule"),))
    assert "SchedulableNodes" not in [f.check for f in run_checks(tolerating, VISIBLE, [tainted])]
    elsewhere = run_checks(shape(10, node_selector={"zone": "b"}), VISIBLE, [ready_node("n")])
    assert (elsewhere[0].check, elsewhere[0].severity) == ("SchedulableNodes", Severity.WARNING)
    too_many = run_checks(shape(500, steps=("createVolume", "publish", "unpublish", "deleteVolume")), VISIBLE,
                          [ready_node("n1"), ready_node("n2")])
    assert any(f.check == "SchedulableNodes" and "220 pods" in f.message for f in too_many)


def test_missing_machinery_and_invisible_machinery_are_info_only() -> None:
    found = run_checks(shape(10), Machinery(visible=True, driver=DRIVER), [ready_node("n")])
    assert {f.check for f in found} == {"CSIDriverNotFound", "ComponentNotFound"}
    assert all(f.severity == Severity.INFO for f in found)
    hidden = Machinery(visible=False, driver=DRIVER, note="HTTP 403")
    assert [f.check for f in run_checks(shape(10), hidden, [ready_node("n")])] == ["MachineryNotVisible"]
    assert outcome(PreflightMode.ENFORCE, [], hidden).status == "Unknown"


def test_enforce_stops_only_on_a_warning() -> None:
    warning = client_throttling(snapshot_controller(), shape(200), VISIBLE)
    assert warning is not None
    enforced = outcome(PreflightMode.ENFORCE, [warning], VISIBLE)
    assert enforced.status == "False" and enforced.stop is not None and "ClientThrottling" in enforced.stop
    assert outcome(PreflightMode.WARN, [warning], VISIBLE).stop is None
    assert outcome(PreflightMode.SKIP, [warning], VISIBLE).reason == "Skipped"
    assert outcome(PreflightMode.ENFORCE, [], VISIBLE).status == "True"


# -- discovery -----------------------------------------------------------------------------------------------------
class RefusingClient:
    """Answers 403 to CSIDriver reads, and records every path asked."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    async def get(self, path: str, query: dict[str, str] | None = None) -> Json | None:
        self.paths.append(path)
        raise ApiError(403, "Forbidden", "csidrivers is forbidden")


def test_a_refused_csidriver_read_turns_discovery_off_after_one_request() -> None:
    client = RefusingClient()
    machinery = asyncio.run(discover_machinery(client, DRIVER))
    assert not machinery.visible and "csibench-discovery" in (machinery.note or "")
    assert client.paths == ["/apis/storage.k8s.io/v1/csidrivers/hostpath.csi.k8s.io"]


# -- the run ---------------------------------------------------------------------------------------------------------
def seed_default_snapshot_controller(fake: FakeKube) -> None:
    fake.put("csidrivers", "", {"metadata": {"name": "sim.csibench.io"}, "spec": {"attachRequired": True}})
    fake.put("pods", "kube-system", pod("snapshot-controller-0", "kube-system", container(
        "snapshot-controller", "registry.k8s.io/sig-storage/snapshot-controller:v8.7.0", ["--v=2"])))


def test_enforce_with_a_warning_fails_the_run_before_anything_exists() -> None:
    fake = FakeKube()
    seed_default_snapshot_controller(fake)
    status = run(fake, spec(volumes=40, volumeSnapshotClassName="snap", preflight="Enforce"))
    assert status.phase is not None and status.phase.value == "Failed"
    assert status.conditions[0].reason == "PreflightFailed" and "ClientThrottling" in (status.message or "")
    assert [k for k in fake.objects if k[0] in ("persistentvolumeclaims", "pods") and k[1] != "kube-system"] == []
    assert not [k for k in fake.objects if k[0] == "namespaces" and k[2].startswith("csibench-")]
    assert {s.state.value for s in status.steps} == {"Pending"} and len(status.steps) == 8
    preflight = next(c for c in status.conditions if c.type == "Preflight")
    assert (preflight.status, preflight.reason) == ("False", "WarningsFound")
    events = {o["reason"]: o["type"] for o in fake.named("events", REF.namespace).values()}
    assert events["PreflightClientThrottling"] == "Warning"
    assert status.environment is not None and status.environment.machinery is not None
    assert [c.kind for c in status.environment.machinery.components] == ["snapshot-controller"]


def test_warn_records_the_finding_and_runs() -> None:
    fake = FakeKube()
    seed_default_snapshot_controller(fake)
    status = run(fake, spec(volumes=40, pvcsPerPod=8, volumeSnapshotClassName="snap"))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    assert [f.check for f in status.preflight if f.severity == Severity.WARNING] == ["ClientThrottling"]
    run_object = {"metadata": {"namespace": "runs", "name": "bench"}, "spec": {"storageClassName": "sim"},
                  "status": status.model_dump(mode="json", exclude_none=True)}
    table = render_table(run_object)
    assert "preflight Warning ClientThrottling: snapshot-controller in kube-system" in table
    assert "CSI machinery of sim.csibench.io: snapshot-controller v8.7.0 (kube-system: kube-api-qps=5" in table


def test_skip_does_not_look() -> None:
    fake = FakeKube()
    seed_default_snapshot_controller(fake)
    status = run(fake, spec(volumes=40, volumeSnapshotClassName="snap", preflight="Skip",
                            steps=["createVolume", "deleteVolume"]))
    assert status.phase is not None and status.phase.value == "Succeeded"
    assert status.preflight == [] and status.environment is not None and status.environment.machinery is None
    assert next(c for c in status.conditions if c.type == "Preflight").reason == "Skipped"


def test_compare_says_when_the_machinery_differs() -> None:
    def finished(qps: str) -> dict[str, Any]:
        component = snapshot_controller(qps, str(int(qps) * 2))
        machinery = Machinery(visible=True, driver=DRIVER, components=[component])
        return {"metadata": {"namespace": "runs", "name": f"q{qps}"}, "status": {
            "phase": "Succeeded", "environment": {"machinery": machinery.model_dump(mode="json")},
            "steps": [{"name": "createSnapshot", "durationSeconds": 10.0, "throughput": 20.0}]}}
    text = render_compare(finished("5"), finished("100"))
    assert "the CSI machinery differs between A and B" in text
    assert "snapshot-controller (kube-system): kube-api-burst 10 -> 200, kube-api-qps 5 -> 100" in text
    assert "differs" not in render_compare(finished("5"), finished("5"))


def test_a_spec_field_defaults_to_warn() -> None:
    assert BenchmarkRunSpec(storageClassName="x").preflight == PreflightMode.WARN


# -- found by review: what real clusters hold -------------------------------------------------------------------------
@pytest.mark.parametrize(("command", "args", "expected"), [
    ([], ["--leader-election", "false", "--kube-api-qps=100"], {"leader-election": "true"}),  # Go stops at "false"
    ([], ["--kube-api-qps", "-1"], {"kube-api-qps": "-1"}),
    ([], ["--timeout=1m", "--", "--kube-api-qps=100"], {"timeout": "1m"}),
    ([], ["--feature-gates=A=true, B=false"], {"feature-gates": "A=true, B=false"}),  # not a shell line
    (["/bin/sh", "-c", "exec /csi-provisioner --kube-api-qps=20 'x y'"], [], {"kube-api-qps": "20"}),
])
def test_flags_stop_and_take_values_where_go_does(command: list[str], args: list[str],
                                                  expected: dict[str, str]) -> None:
    assert parse_flags(command, args) == expected


def test_a_driver_whose_name_is_part_of_another_is_not_given_the_others_sidecars() -> None:
    pods = [hostpath_controller("nfs.csi.example.com", qps="5"), hostpath_controller("csi.example.com", qps="100")]
    found = components_for(pods, "csi.example.com")
    assert {c.flags.get("kube-api-qps") for c in found if c.kind == "csi-provisioner"} == {"100"}
    by_path = pod("p", "a", container("csi-provisioner", "csi-provisioner:v6.4.0",
                                      ["--csi-address=/var/lib/kubelet/plugins/nfs.csi.example.com/csi.sock"]))
    assert components_for([by_path], "csi.example.com", registered=False) == []


def test_the_lone_sidecar_of_a_kind_is_taken_only_for_a_registered_driver() -> None:
    elsewhere = pod("p2", "b", container("csi-provisioner", "csi-provisioner:v6.4.0", ["--csi-address=/x/y.sock"]))
    assert components_for([elsewhere], DRIVER, registered=False) == []
    assert [c.matchedBy for c in components_for([elsewhere], DRIVER, registered=True)] == [
        "the only csi-provisioner in the cluster"]


def test_client_go_limit_semantics_zero_is_the_default_and_negative_is_no_limit() -> None:
    assert client_throttling(snapshot_controller("-1", "0"), shape(200), VISIBLE) is None
    zero = client_throttling(snapshot_controller("0", "0"), shape(200), VISIBLE)
    assert zero is not None and "--kube-api-qps=5 --kube-api-burst=10" in zero.message


def test_an_info_floor_does_not_advise_raising_what_is_already_raised() -> None:
    finding = client_throttling(snapshot_controller("400", "800"), shape(300), VISIBLE)
    assert finding is not None and finding.severity == Severity.INFO
    assert "Raise" not in finding.message and "not a distortion" in finding.message


def test_a_provisioner_that_cannot_be_a_csi_driver_is_said_and_the_run_goes_on() -> None:
    fake = FakeKube()
    fake.put("storageclasses", "", {"metadata": {"name": "local"}, "provisioner": "rancher.io/local-path",
                                    "volumeBindingMode": "Immediate"})
    status = run(fake, spec(storageClassName="local", steps=["createVolume", "deleteVolume"], volumes=2))
    assert [f.check for f in status.preflight] == ["NotACSIDriver"]
    assert status.environment is not None and status.environment.machinery is not None
    assert "rancher.io/local-path" in (status.environment.machinery.note or "")


def test_two_replicas_serving_on_their_own_endpoints_are_still_the_only_sidecar_of_their_kind() -> None:
    """The local cluster's standby provisioner: the same flags but no --http-endpoint (each replica serves its own
    port): one component of two replicas, found as the lone provisioner (its --csi-address names no driver)."""
    image = "registry.k8s.io/sig-storage/csi-provisioner:v6.4.0"
    first = pod("csi-provisioner-sim-node-0", "kube-system", container(
        "csi-provisioner", image, ["--csi-address=/s/controller.sock", "--http-endpoint=127.0.1.1:18450",
                                   "--timeout=30s"]))
    standby = pod("csi-provisioner-sim-node-1", "kube-system", container(
        "csi-provisioner", image, ["--csi-address=/s/controller.sock", "--timeout=30s"]))
    (found,) = components_for([first, standby], DRIVER)
    assert (found.kind, found.replicas, found.matchedBy) == ("csi-provisioner", 2, "the only csi-provisioner in the "
                                                                                     "cluster"), found


def test_replicas_are_one_component_with_a_count_and_one_finding() -> None:
    replicas = [pod(f"snapshot-controller-7d-{suffix}", "kube-system", container(
        "snapshot-controller", "registry.k8s.io/sig-storage/snapshot-controller:v8.7.0", ["--leader-election=true"]))
        for suffix in ("a", "b")]
    (found,) = components_for(replicas, DRIVER)
    assert found.replicas == 2
    machinery = Machinery(visible=True, driver=DRIVER, csiDriver={}, components=[found])
    assert [f.check for f in run_checks(shape(200, steps=("createVolume", "createSnapshot", "deleteSnapshot",
                                                          "deleteVolume")), machinery, [ready_node("n")])
            ].count("ClientThrottling") == 1


def test_a_data_path_working_set_that_fits_a_cache_is_a_warning_that_says_which() -> None:
    def node(name: str, memory: str) -> dict[str, Any]:
        return {"metadata": {"name": name}, "status": {"capacity": {"memory": memory},
                                                       "conditions": [{"type": "Ready", "status": "True"}]}}
    nodes = [node("a", "8Gi"), node("b", "1Gi"), node("c", "16Gi")]

    def findings(**data: Any) -> list[Any]:
        run_spec = BenchmarkRunSpec.model_validate({"storageClassName": "fast", "volumes": 6, "size": "1Gi",
                                                    "dataPath": {"rampSeconds": 0, **data}})
        return [f for f in run_checks(RunShape.of(run_spec, ["createVolume", "dataPath"], "Immediate"),
                                      Machinery(visible=True), nodes) if f.check == "DataPathCache"]
    # 6 volumes over 3 nodes: 2 each, 2 jobs x 16Mi = 64Mi per node, below the smallest memory (1Gi on b)
    (cached,) = findings(direct=False)
    assert cached.severity == Severity.WARNING and "page cache" in cached.message and "on 3 of 3 nodes" in \
        cached.message and "a: 2 volume(s) x 32Mi against 8,192Mi" in cached.message
    assert cached.facts == {"nodes": "a,b,c", "workingSetPerNode": str(64 * 2**20), "nodeMemory": str(8 * 2**30)}
    assert findings() == []  # direct I/O bypasses the page cache
    # 2 volumes x 2 jobs x 500Mi per node: over b's 1Gi, under a's and c's; a node without memory is not judged
    (some,) = findings(direct=False, fileSize="500Mi")
    assert some.facts["nodes"] == "a,c" and "on 2 of 3 nodes" in some.message
    nodes[0]["status"]["capacity"] = None
    (fewer,) = findings(direct=False, fileSize="500Mi")
    assert fewer.facts["nodes"] == "c"
    nodes[2]["status"]["capacity"] = {"memory": "1Gi"}
    assert findings(direct=False, fileSize="500Mi") == []
    (array,) = findings(arrayCacheBytes="1Gi")  # 6 x 32Mi = 192Mi < 1Gi, whatever direct says
    assert "arrayCacheBytes 1,024Mi" in array.message and array.facts["workingSet"] == str(192 * 2**20)
    assert findings(arrayCacheBytes="100Mi") == []


def test_a_data_path_runtime_shorter_than_its_ramp_is_a_warning() -> None:
    def findings(**data: Any) -> list[Any]:
        run_spec = BenchmarkRunSpec.model_validate({"storageClassName": "fast", "volumes": 2, "size": "1Gi",
                                                    "dataPath": data})
        return [f for f in run_checks(RunShape.of(run_spec, ["createVolume", "dataPath"], "Immediate"),
                                      Machinery(visible=True), []) if f.check == "DataPathShortRuntime"]
    (short,) = findings(rampSeconds=10, runtimeSeconds=5)
    assert short.severity == Severity.WARNING and "runtimeSeconds (5) is shorter than its rampSeconds (10)" in \
        short.message and short.facts == {"runtimeSeconds": "5", "rampSeconds": "10"}
    assert findings(rampSeconds=5, runtimeSeconds=5) == [] and findings() == []
