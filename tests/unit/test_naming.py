"""Deterministic object names and the volumes of each pod."""

from __future__ import annotations

import pytest

from csibench.engine.errors import PlanError
from csibench.engine.naming import Names, pod_count, volumes_of_pod


def test_names_are_deterministic_and_bounded() -> None:
    names = Names.for_run("seed-1000", "0123456789")
    assert names.volume(7) == "seed-1000-01234-v00007" and names.pod(0) == "seed-1000-01234-p00000"
    assert names.namespace == "csibench-seed-1000-01234" and len(Names.for_run("x" * 40, "u" * 36).namespace) <= 63
    with pytest.raises(PlanError):
        Names.for_run("x" * 41, "uid")


def test_pods_take_k_volumes_each() -> None:
    assert pod_count(10, 4) == 3
    assert [volumes_of_pod(p, 10, 4) for p in range(3)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
