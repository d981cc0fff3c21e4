"""The simulated kubelet's half of volume expansion, pure parts: which claims wait for it, what it writes."""

from __future__ import annotations

import pytest

from localcluster.simulator.config import Operation, parse_backend_model
from localcluster.simulator.expansion import build_expansion_finished, node_resize_pending, quantity_bytes


def test_quantities_are_read_as_the_api_server_writes_them() -> None:
    assert quantity_bytes("2Gi") == 2 * 2**30 and quantity_bytes("1500M") == 1_500_000_000
    assert quantity_bytes("1073741824") == 2**30 and quantity_bytes("1.5Gi") == 3 * 2**29
    for bad in ("", "2GB", "-1Gi", "Gi"):
        with pytest.raises(ValueError):
            quantity_bytes(bad)


def test_only_a_claim_the_resizer_left_to_the_node_is_grown_by_it() -> None:
    assert node_resize_pending({"status": {"allocatedResourceStatuses": {"storage": "NodeResizePending"}}})
    for status in ({}, {"allocatedResourceStatuses": {"storage": "ControllerResizeInProgress"}},
                   {"allocatedResourceStatuses": {"storage": "NodeResizeInfeasible"}}):
        assert not node_resize_pending({"status": status})


def test_the_finished_expansion_leaves_no_resize_condition_and_no_storage_status() -> None:
    claim = {"status": {"capacity": {"storage": "1Gi"}, "allocatedResourceStatuses": {"storage": "NodeResizePending"},
                        "conditions": [{"type": "FileSystemResizePending", "status": "True"},
                                       {"type": "ModifyingVolume", "status": "True"}]}}
    patch = build_expansion_finished(claim, "2Gi")
    assert patch == {"status": {"capacity": {"storage": "2Gi"}, "conditions": [{"type": "ModifyingVolume",
                                                                                "status": "True"}],
                                "allocatedResourceStatuses": {"storage": None}}}
    only_resize = {"status": {"conditions": [{"type": "FileSystemResizePending", "status": "True"}]}}
    assert build_expansion_finished(only_resize, "2Gi")["status"]["conditions"] is None  # removed, not []


def test_the_controllers_expansion_has_its_own_latency_parameter() -> None:
    model = parse_backend_model({"latency": "10ms", "expandLatency": "2s"})
    assert model.latency(Operation.EXPAND_VOLUME) == 2.0 and model.latency(Operation.CREATE_VOLUME) == 0.01
