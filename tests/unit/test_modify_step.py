"""modifyVolume against the in-memory API server (its resizer moves a claim to the class its spec names, or refuses
a class as Infeasible), its fio rounds and table, and the simulated array's QoS limits (pure parts)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from csibench.api.models import BenchmarkRunSpec, StepState
from csibench.engine.steps.modify import fio
from csibench.engine.steps.modify.step import MODIFY_TO
from csibench.report import modify as modify_report
from localcluster.simulator import qos
from localcluster.simulator.driver import _unsupported_mutable
from tests.support.fake_kube import Behaviour, FakeKube
from tests.support.fake_runs import NAMES, kill_when, owned_left, resume, run, running, spec


def modify_spec(**modify: Any) -> BenchmarkRunSpec:
    return spec(volumes=3, steps=["createVolume", "modifyVolume", "deleteVolume"],
                modify={"volumeAttributesClassName": "gold", "fioSeconds": 1, **modify})


def test_every_claim_moves_to_the_class_timed_until_in_effect_with_fio_before_and_after() -> None:
    fake = FakeKube(Behaviour(resize_delay=0.05))
    status = run(fake, modify_spec())
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    step = next(s for s in status.steps if s.name == "modifyVolume")
    assert (step.objects, step.succeeded, step.failed) == (3, 3, 0)
    assert step.latency is not None and step.latency.p50 >= 0.05  # the resizer's delay, from the PATCH
    assert [row.when.value for row in status.modify] == ["before", "after"]
    assert all(row.state == StepState.SUCCEEDED and row.volumes == 3 for row in status.modify), status.modify
    assert status.modify[1].attributesClass == "gold"
    assert status.modify[0].readIOPS and status.modify[0].readIOPS > 0
    pods = [body for path, body in fake.created if path.endswith("/pods")]
    assert [p["metadata"]["name"] for p in pods] == [NAMES.modify_pod(i) for i in range(6)]
    mounted = [p["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] for p in pods]
    assert mounted == [NAMES.volume(i % 3) for i in range(6)]  # each volume before, then after
    assert owned_left(fake) == []


def test_the_patch_names_the_class_and_marks_it_for_the_judge() -> None:
    fake = FakeKube(Behaviour(resize_delay=0.05))
    status = run(fake, spec(volumes=3, steps=["createVolume", "modifyVolume"], cleanup="Never",
                            modify={"volumeAttributesClassName": "gold", "fioSeconds": 0}))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    for index in range(3):
        claim = fake.objects[("persistentvolumeclaims", NAMES.namespace, NAMES.volume(index))]
        assert claim["spec"]["volumeAttributesClassName"] == "gold"
        assert claim["metadata"]["annotations"][MODIFY_TO] == "gold"
        assert claim["status"]["currentVolumeAttributesClassName"] == "gold"
    assert not [path for path, _ in fake.created if path.endswith("/pods")]  # no fio: no pods
    assert status.modify == []


def test_a_class_the_driver_refuses_fails_each_volume_infeasible_with_the_resizers_words() -> None:
    fake = FakeKube(Behaviour(resize_delay=0.05, modify_infeasible={"gold"}))
    status = run(fake, modify_spec(fioSeconds=0))
    assert status.phase is not None and status.phase.value == "Failed"
    step = next(s for s in status.steps if s.name == "modifyVolume")
    assert (step.succeeded, step.failed) == (0, 3)
    reasons = {r.reason: r for r in step.failureReasons}
    assert "Infeasible" in reasons and "refused" in (reasons["Infeasible"].message or "")
    assert owned_left(fake) == []


def test_an_operator_restart_mid_change_deletes_the_fio_pods_first_and_measures_again() -> None:
    fake = FakeKube(Behaviour(resize_delay=0.3))
    run_spec = modify_spec()
    previous = kill_when(fake, run_spec, running("modifyVolume"), extra_sleep=0.2)
    status = resume(fake, run_spec, previous)
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    step = next(s for s in status.steps if s.name == "modifyVolume")
    assert (step.succeeded, step.failed, step.attempts) == (3, 0, 2)
    assert owned_left(fake) == []


def test_fios_log_becomes_what_each_volume_delivered_and_the_table_puts_after_over_before() -> None:
    log = "fio: a note\n" + json.dumps({"jobs": [{"error": 0, "read": {"iops": 100.0, "bw_bytes": 409600},
                                                  "write": {"iops": 50.0, "bw_bytes": 204800}}]})
    delivered = fio.parse_log(log)
    assert (delivered.read_iops, delivered.write_iops, delivered.read_bps) == (100.0, 50.0, 409600.0)
    with pytest.raises(fio.FioFailed, match="No such file"):
        fio.parse_log("fio: pid=12, err=2/file:filesetup.c:240, func=open, error=No such file or directory\n")
    with pytest.raises(fio.FioFailed, match="error 5"):
        fio.parse_log(json.dumps({"jobs": [{"error": 5}]}))
    run_status = {"status": {"modify": [
        {"when": "before", "attributesClass": "bronze", "volumes": 2, "readIOPS": 1000.0, "writeIOPS": 1000.0,
         "readMiBps": 3.9, "writeMiBps": 3.9, "perVolumeIOPS": 1000.0, "state": "Succeeded"},
        {"when": "after", "attributesClass": "gold", "volumes": 2, "readIOPS": 250.0, "writeIOPS": 250.0,
         "readMiBps": 1.0, "writeMiBps": 1.0, "perVolumeIOPS": 250.0, "state": "Succeeded"}]}}
    headers, rows = modify_report.table(run_status) or ([], [])
    assert headers[0] == "When" and rows[2][0] == "after / before" and rows[2][3] == "0.25×"
    assert modify_report.table({"status": {}}) is None


def test_the_arrays_limits_are_whole_numbers_kept_beside_the_data_and_only_for_volumes_with_a_device(
        tmp_path: Path) -> None:
    assert qos.parse({"maxIOPS": "200", "qosPolicy": "gold"}) == ({"maxIOPS": 200}, None)
    assert qos.parse({"maxIOPS": "0", "maxMiBps": "8"}) == ({"maxMiBps": 8}, None)  # 0: no limit
    for bad in ("-1", "1.5", "\uff12", "1e3", str(10**10)):  # \uff12: a full-width 2
        assert qos.parse({"maxIOPS": bad})[1] is not None, bad
    assert qos.rules("7:3", {"maxIOPS": 200}) == {
        "blkio.throttle.read_iops_device": "7:3 200", "blkio.throttle.write_iops_device": "7:3 200",
        "blkio.throttle.read_bps_device": "7:3 0", "blkio.throttle.write_bps_device": "7:3 0"}
    assert qos.rules("7:3", {"maxMiBps": 2})["blkio.throttle.write_bps_device"] == f"7:3 {2 << 20}"
    qos.write(tmp_path, {"maxIOPS": 200, "maxMiBps": 8})
    assert qos.read(tmp_path) == {"maxIOPS": 200, "maxMiBps": 8}
    qos.write(tmp_path, {})
    assert qos.read(tmp_path) == {} and not (tmp_path / qos.QOS_NAME).exists()
    (tmp_path / "elsewhere.json").write_text('{"maxIOPS": 1}')
    (tmp_path / qos.QOS_NAME).symlink_to(tmp_path / "elsewhere.json")  # a link is never the array's own
    assert qos.read(tmp_path) == {}
    assert _unsupported_mutable({"maxIOPS": "200"}, "ext4") is None
    refused = _unsupported_mutable({"maxIOPS": "200"}, "directory")
    assert refused is not None and "only ext4 volumes" in refused
    assert _unsupported_mutable({"maxIOPS": "lots"}, "ext4") is not None
    assert _unsupported_mutable({"qosPolicy": "gold"}, "directory") is None  # a name only: any volume


def test_a_device_is_throttled_through_the_hosts_block_controller(tmp_path: Path) -> None:
    """apply writes each rule to its file (here a folder standing in for the blkio controller; a regular file's
    device number is 0:0)."""
    device = tmp_path / "dev"
    device.write_text("")
    for name in (*qos.IOPS_FILES, *qos.BPS_FILES):
        (tmp_path / name).write_text("")
    with pytest.raises(OSError):
        qos.apply(str(tmp_path / "missing"), {"maxIOPS": 5}, root=tmp_path)
    qos.apply(str(device), {"maxIOPS": 5}, root=tmp_path)
    assert (tmp_path / "blkio.throttle.read_iops_device").read_text() == "0:0 5"
    with pytest.raises(qos.QosUnavailable, match="cannot throttle"):
        qos.apply(str(device), {"maxIOPS": 5}, root=tmp_path / "nowhere")


@pytest.mark.parametrize(("attributes_class", "reason", "words"), [
    ("missing", "VolumeAttributesClassNotFound", "VolumeAttributesClass 'missing' does not exist"),
    ("foreign", "InvalidSpec", "is for driver 'other.example.com', not 'sim.csibench.io'"),
])
def test_a_class_that_is_not_there_or_not_the_drivers_fails_the_run_before_anything_is_made(
        attributes_class: str, reason: str, words: str) -> None:
    fake = FakeKube()
    status = run(fake, modify_spec(volumeAttributesClassName=attributes_class))
    assert status.phase is not None and status.phase.value == "Failed"
    assert reason in {condition.reason for condition in status.conditions}, status.conditions
    assert status.message is not None and words in status.message
    assert not [path for path, _ in fake.created if not path.endswith("/events")]  # an Event, nothing else


def test_an_operator_restart_in_the_round_after_the_change_redoes_the_step_rather_than_find_it_done() -> None:
    """The change's clock stops with the change, but the step is not done until the fio round after it is: a
    restart there finds it Running and measures it again."""
    fake = FakeKube(Behaviour(resize_delay=0.05, ready_delay=0.3))
    run_spec = modify_spec()

    def after_round_running(status: dict[str, Any]) -> bool:
        return any(row.get("when") == "after" and row.get("state") == "Running" for row in status.get("modify", []))

    previous = kill_when(fake, run_spec, after_round_running, extra_sleep=0.1)
    assert next(s for s in previous["steps"] if s["name"] == "modifyVolume")["state"] == "Running"
    status = resume(fake, run_spec, previous)
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    assert [row.state for row in status.modify] == [StepState.SUCCEEDED] * 2
    assert owned_left(fake) == []


def test_with_no_bound_volume_there_is_no_fio_round_and_no_row() -> None:
    fake = FakeKube(Behaviour(never_bind={NAMES.volume(i) for i in range(3)}))
    status = run(fake, spec(volumes=3, steps=["createVolume", "modifyVolume", "deleteVolume"],
                            timeouts={"createVolume": 1},
                            modify={"volumeAttributesClassName": "gold", "fioSeconds": 1}))
    assert status.modify == []
    assert not [path for path, _ in fake.created if path.endswith("/pods")]


def test_fios_words_around_its_json_are_kept_and_a_failed_job_says_why() -> None:
    result = json.dumps({"jobs": [{"error": 0, "read": {"iops": 7.0, "bw_bytes": 28672},
                                   "write": {"iops": float("inf"), "bw_bytes": 1}}]})
    assert fio.parse_log(result + "\nfio: pid=12, err=28/file:io_u.c:1889, func=io_u error, error=No space left "
                                  "on device\n").read_iops == 7.0  # words after the JSON: the JSON still counts
    assert fio.parse_log(result).write_iops == 0.0  # not a finite number: not a measurement
    with pytest.raises(fio.FioFailed, match="No space left on device"):
        fio.parse_log("fio: io_u error on file /data/csibench-modify: No space left on device: write\n"
                      + json.dumps({"jobs": [{"error": 28}]}))


def test_a_containers_throttle_rules_go_with_it_unless_the_device_is_someone_elses(tmp_path: Path) -> None:
    root = tmp_path / "blkio"
    root.mkdir()
    record = tmp_path / "throttled-devices"
    record.write_text("7:9999 /nowhere/ext4.img\n")  # a loop device that is not bound (no such device here)
    qos.release(record, root=root, settle_seconds=0)
    assert (root / "blkio.throttle.read_iops_device").read_text() == "7:9999 0"
    assert not record.exists()
    qos.release(record, root=root)  # nothing recorded: nothing to do


@pytest.mark.parametrize(("modify", "words"), [
    ({"fioSize": "1Gi"}, "modify.fioSize must be less than size"),
    ({"fioSize": "0.5"}, "String should match pattern"),
    ({"fioSize": "0"}, "String should match pattern"),
    ({"volumeAttributesClassName": "Not_A_Name"}, "String should match pattern"),
    ({"fioSeconds": -1}, "greater than or equal to 0"),
])
def test_admission_refuses_a_change_fio_could_not_measure(modify: dict[str, Any], words: str) -> None:
    from pydantic import ValidationError
    with pytest.raises(ValidationError, match=words):
        spec(size="1Gi", steps=["createVolume", "modifyVolume"],
             modify={"volumeAttributesClassName": "gold", **modify})


def test_a_file_as_large_as_the_volume_is_fine_when_no_fio_runs() -> None:
    spec(size="64Mi", steps=["createVolume", "modifyVolume"],
         modify={"volumeAttributesClassName": "gold", "fioSeconds": 0})
