"""The step catalog: the registry of every step's entry, read by planning, execution, restore and the report.

What a step *is* (its order, title and unit, what it requires, which spec part enables it) is ``api/steps.py``,
which reports and preflight read without the engine. How it acts is its entry (``engine/step.StepSpec``), which
its own module under ``engine/steps/`` declares as ``ENTRIES``, one module per step or lifecycle pair. This module
only collects them, in the facts' (lifecycle) order: adding a step is its facts and one new module under
``engine/steps/``, and nothing here (``tests/unit/test_adding_a_step.py`` adds one and runs it). A module that
declares a step without facts, or a step declared twice, is an error at import; an unknown step name is an error,
never a fall-through.
"""

from __future__ import annotations

import importlib
import pkgutil

from csibench.api import steps as facts
from csibench.engine import steps as step_modules
from csibench.engine.step import StepSpec


def collect() -> dict[str, StepSpec]:
    """Every entry the modules (and packages) under ``engine/steps/`` declare, in the order of their facts."""
    found: dict[str, StepSpec] = {}
    for module in pkgutil.walk_packages(step_modules.__path__, f"{step_modules.__name__}."):
        for entry in getattr(importlib.import_module(module.name), "ENTRIES", ()):
            if entry.name not in facts.STEP_FACTS:
                raise ValueError(f"{module.name} declares step {entry.name!r}, which has no facts in api/steps.py")
            if entry.name in found:
                raise ValueError(f"step {entry.name!r} is declared twice (again in {module.name})")
            found[entry.name] = entry
    order = list(facts.STEP_FACTS)
    return {name: found[name] for name in sorted(found, key=order.index)}


STEPS: dict[str, StepSpec] = collect()


def step_named(name: str) -> StepSpec:
    """The catalog entry of a step; an unknown name is an error, never a fall-through."""
    try:
        return STEPS[name]
    except KeyError:
        raise KeyError(f"step {name!r} is not in the step catalog") from None
