"""Which part of the spec enables a step, read from one fact (``StepFacts.spec_part``, ``api/steps.py``) and said
four ways from it: whether the run runs the step (``enabled``: the plan's default, admission's ``runs_step``),
the same in CEL (``STEP_RUNS_WHEN``, the CRD's reading of a threshold's step), and the rule that ``spec.steps``,
when given, lists a step exactly when its part is set, in Python (``listing_problem``) and in CEL
(``LISTING_RULES``), so the models and the CRD cannot disagree.

A part is an object of the spec, set or not (``move``), or a switch inside one (``dataPath.verify``: the part
set and the switch true). The rule "listed exactly when" holds for the first step a part enables (a part that
enables a lifecycle pair, ``groupSnapshot``, may run its creation alone: cleanup deletes what it made). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable

from csibench.api import steps

SNAPSHOT_CLASS = "volumeSnapshotClassName"


def is_set(spec: object, part: str) -> bool:
    """Whether ``spec.<part>`` is set: each object on the path present, a switch at its end true."""
    value: object = spec
    for name in part.split("."):
        value = getattr(value, name, None)
        if value is None or value is False:
            return False
    return True


def part_cel(part: str) -> str:
    """``is_set`` in CEL: 'has(self.move)'; 'has(self.dataPath) && has(self.dataPath.verify) &&
    self.dataPath.verify'."""
    names = part.split(".")
    paths = [".".join(names[:end]) for end in range(1, len(names) + 1)]
    return " && ".join([f"has(self.{path})" for path in paths] + ([f"self.{part}"] if len(names) > 1 else []))


def said(part: str) -> str:
    """'spec.move is set', 'spec.dataPath.verify is true'."""
    return f"spec.{part} is {'true' if '.' in part else 'set'}"


def enabled(facts: steps.StepFacts, spec: object) -> bool:
    """Whether the spec's parts let the step run: its part set, and a snapshot class when it needs one."""
    return (not facts.needs_snapshot_class or bool(getattr(spec, SNAPSHOT_CLASS, None))) and (
        facts.spec_part is None or is_set(spec, facts.spec_part))


def runs_when(facts: steps.StepFacts) -> str | None:
    """``enabled`` in CEL, or None when nothing in the spec holds the step back."""
    conditions = ([f"has(self.{SNAPSHOT_CLASS})"] if facts.needs_snapshot_class else []) + (
        [part_cel(facts.spec_part)] if facts.spec_part is not None else [])
    return " && ".join(conditions) or None


def listed_with_their_parts(all_facts: Iterable[steps.StepFacts]) -> list[steps.StepFacts]:
    """The steps ``spec.steps`` lists exactly when their part is set: the first step each part enables."""
    seen: set[str] = set()
    found = []
    for facts in all_facts:
        if facts.spec_part is not None and facts.spec_part not in seen:
            seen.add(facts.spec_part)
            found.append(facts)
    return found


def listing_message(facts: steps.StepFacts) -> str:
    assert facts.spec_part is not None
    return f"steps must list {facts.name} exactly when {said(facts.spec_part)}"


def listing_problem(spec: object, listed: Iterable[str] | None) -> str | None:
    """The first step that ``spec.steps`` lists without its part, or leaves out with its part set."""
    if listed is None:
        return None
    names = set(listed)
    for facts in listed_with_their_parts(steps.STEP_FACTS.values()):
        assert facts.spec_part is not None
        if (facts.name in names) != is_set(spec, facts.spec_part):
            return listing_message(facts)
    return None


def _grouped(cel: str) -> str:
    return f"({cel})" if "&&" in cel else cel


STEP_RUNS_WHEN: dict[str, str] = {facts.name: cel for facts in steps.STEP_FACTS.values()
                                  if (cel := runs_when(facts)) is not None}
LISTING_RULES: tuple[tuple[str, str], ...] = tuple(
    (f"!has(self.steps) || {_grouped(part_cel(facts.spec_part))} == ('{facts.name}' in self.steps)",
     listing_message(facts))
    for facts in listed_with_their_parts(steps.STEP_FACTS.values()) if facts.spec_part is not None)
