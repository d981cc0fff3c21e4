"""Which spec part enables a step is one fact (``StepFacts.spec_part``); the plan, ``runs_step``, the CEL and the
rule that spec.steps lists a step exactly when its part is set are derived from it (``api/enabling.py``)."""

from __future__ import annotations

import typing
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from csibench.api.enabling import LISTING_RULES, STEP_RUNS_WHEN, listed_with_their_parts, part_cel, said
from csibench.api.models import BenchmarkRunSpec
from csibench.api.steps import STEP_FACTS
from csibench.engine.plan import resolve_steps

# The least of each part that the models accept.
PARTS: dict[str, dict[str, Any]] = {
    "move": {"move": {}}, "expand": {"expand": {"by": "1Gi"}}, "density": {"density": {"volumesPerNode": [1]}},
    "dataPath": {"dataPath": {}}, "database": {"database": {}},
    "groupSnapshot": {"groupSnapshot": {"volumeGroupSnapshotClassName": "group"}},
    "dataPath.verify": {"dataPath": {"verify": True}, "volumeSnapshotClassName": "snap"},
    "ephemeral": {"ephemeral": {"pods": 1}},
    "shared": {"shared": {}},
    "modify": {"modify": {"volumeAttributesClassName": "gold"}},
    "churn": {"churn": {"durationSeconds": 110, "windowSeconds": 10}},
}
UNSET: dict[str, dict[str, Any]] = {"dataPath.verify": {"dataPath": {"verify": False}}}  # the part, switched off


def _model_of(annotation: Any) -> Any:
    found = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    return found[0] if found else annotation


def test_a_part_is_an_optional_object_of_the_spec_or_a_switch_in_one() -> None:
    """The convention ``is_set`` and ``part_cel`` read a part by: its first name an optional object of the spec,
    a second one a boolean inside it."""
    parts = {facts.spec_part for facts in STEP_FACTS.values() if facts.spec_part is not None}
    assert parts == set(PARTS)
    for part in parts:
        first, *rest = part.split(".")
        field = BenchmarkRunSpec.model_fields[first]
        model = _model_of(field.annotation)
        assert field.default is None and issubclass(model, BaseModel), part
        assert len(rest) <= 1 and all(model.model_fields[name].annotation in (bool, "bool") for name in rest), part


def test_the_cel_says_what_python_says() -> None:
    assert part_cel("move") == "has(self.move)" and said("move") == "spec.move is set"
    assert part_cel("dataPath.verify") == "has(self.dataPath) && has(self.dataPath.verify) && self.dataPath.verify"
    assert said("dataPath.verify") == "spec.dataPath.verify is true"
    assert STEP_RUNS_WHEN["verifyClone"] == ("has(self.volumeSnapshotClassName) && has(self.dataPath) && "
                                             "has(self.dataPath.verify) && self.dataPath.verify")
    assert STEP_RUNS_WHEN["deleteGroupSnapshot"] == "has(self.groupSnapshot)"
    assert "createVolume" not in STEP_RUNS_WHEN and "publish" not in STEP_RUNS_WHEN


@pytest.mark.parametrize("step", [facts.name for facts in listed_with_their_parts(STEP_FACTS.values())])
def test_spec_steps_lists_the_first_step_of_a_part_exactly_when_the_part_is_set(step: str) -> None:
    facts = STEP_FACTS[step]
    assert facts.spec_part is not None
    part = PARTS[facts.spec_part]
    base = {"storageClassName": "sim", "volumeSnapshotClassName": "snap", **part}
    plan = [s.name for s in resolve_steps(BenchmarkRunSpec.model_validate(base))]
    assert step in plan  # the default plan runs it with its part
    message = f"steps must list {step} exactly when {said(facts.spec_part)}"
    cel = part_cel(facts.spec_part)
    grouped = f"({cel})" if "." in facts.spec_part else cel
    assert [rule for rule, said_ in LISTING_RULES if said_ == message] == [
        f"!has(self.steps) || {grouped} == ('{step}' in self.steps)"]
    with pytest.raises(ValidationError, match=message.replace(".", r"\.")):  # its part, the step left out
        BenchmarkRunSpec.model_validate({**base, "steps": [s for s in plan if s != step]})
    without = {**base, **UNSET.get(facts.spec_part, {})}
    without.pop(facts.spec_part, None)
    with pytest.raises(ValidationError, match=message.replace(".", r"\.")):  # the step, no part
        BenchmarkRunSpec.model_validate({**without, "steps": plan})


def test_a_part_that_enables_a_pair_may_run_its_creation_alone() -> None:
    """deleteGroupSnapshot shares createGroupSnapshot's part: only the first is held to be listed with it."""
    assert [f.name for f in listed_with_their_parts(STEP_FACTS.values())] == [
        "moveVolume", "expandVolume", "modifyVolume", "density", "dataPath", "database", "sharedVolume",
        "createGroupSnapshot", "verifyClone", "createEphemeral", "churn"]
    spec = BenchmarkRunSpec.model_validate({"storageClassName": "sim", **PARTS["groupSnapshot"],
                                            "steps": ["createVolume", "createGroupSnapshot", "deleteVolume"]})
    assert not spec.runs_step("deleteGroupSnapshot") and spec.runs_step("createGroupSnapshot")
