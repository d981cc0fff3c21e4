"""The documentation site's reference (docs/reference/) is generated, committed, and complete.

Drift: the committed pages must be exactly what ``csibench docs-reference`` renders now (as crds/ is held to the
models). Completeness, read from the code independently of the renderer: every field of both CRDs, every metric
the operator registers, every command and option of the CLI, and every reason a condition is set with anywhere in
the package (read from the source) appears in the pages, so a new one cannot ship undocumented.
"""

from __future__ import annotations

import argparse
import ast
import re
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from csibench.api.crd import build_crd, build_suite_crd
from csibench.api.models import ConditionReason
from csibench.api.regression import Change
from csibench.cli import EXIT_CODES, build_parser, main
from csibench.metrics import Metrics
from csibench.reference import render_reference
from csibench.suite.controller import SuiteReason
from localcluster.launcher import REPO_ROOT

REFERENCE = REPO_ROOT / "docs" / "reference"
PACKAGE = REPO_ROOT / "operator" / "csibench"


def pages() -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted(REFERENCE.glob("*.md"))}


def test_the_committed_reference_is_what_the_generator_renders() -> None:
    rendered = render_reference(build_parser(), EXIT_CODES)
    assert sorted(pages()) == sorted(rendered), "docs/reference/ has other pages than the generator writes"
    drifted = [name for name, text in rendered.items() if pages()[name] != text]
    assert not drifted, f"docs/reference/ drifted ({drifted}): run `csibench docs-reference -o docs/reference`"


def test_the_command_writes_the_pages(tmp_path: Any) -> None:
    assert main(["docs-reference", "-o", str(tmp_path / "ref")]) == 0
    assert {p.name: p.read_text() for p in (tmp_path / "ref").iterdir()} == pages()


def _paths(schema: dict[str, Any], path: str) -> Iterator[str]:
    for name, sub in (schema.get("properties") or {}).items():
        here = f"{path}.{name}"
        yield here
        while (sub.get("type") == "array" and isinstance(sub.get("items"), dict)) or \
                ("properties" not in sub and isinstance(sub.get("additionalProperties"), dict)):
            if sub.get("type") == "array":
                sub, here = sub["items"], f"{here}[]"
            else:
                sub, here = sub["additionalProperties"], f"{here}.*"
        yield from _paths(sub, here)


def _code(name: str) -> str:
    """A field's name as the page writes it inside <code> (Markdown's characters as entities)."""
    return "<code>" + name.replace("_", "&#95;") + "</code>"


def _section(text: str, path: str) -> str:
    """The body of the page's section headed with ``path`` (in backquotes), up to the next heading."""
    parts = re.split(r"^#{2,3} `([^`]*)`$", text, flags=re.M)
    bodies = dict(zip(parts[1::2], parts[2::2], strict=True))
    return bodies.get(path, "")


@pytest.mark.parametrize(("crd", "page"), [(build_crd(), "benchmarkrun.md"), (build_suite_crd(), "benchmarksuite.md")])
def test_every_field_of_the_crd_is_in_the_reference(crd: dict[str, Any], page: str) -> None:
    root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    text = pages()[page]
    paths = [p for part in ("spec", "status") for p in _paths(root[part], part)]
    assert len(paths) > 50
    missing = []
    for path in paths:
        parent, _, name = path.rpartition(".")
        if f"| {_code(name)}" not in _section(text, parent):
            missing.append(path)
    assert not missing, f"fields missing from docs/reference/{page}: {missing}"
    rules = [r["message"] for r in _rules(root["spec"])]
    assert rules and all(" ".join(message.split()) in text for message in rules)


def _rules(schema: dict[str, Any]) -> Iterator[dict[str, str]]:
    yield from schema.get("x-kubernetes-validations") or []
    for sub in [*(schema.get("properties") or {}).values(), schema.get("items"), schema.get("additionalProperties")]:
        if isinstance(sub, dict):
            yield from _rules(sub)


def test_every_metric_is_in_the_reference() -> None:
    registry = CollectorRegistry()
    Metrics(registry)
    names = {family.name + ("_total" if family.type == "counter" else "") for family in registry.collect()}
    assert len(names) > 20
    text = pages()["metrics.md"]
    assert not [name for name in names if f"`{name}`" not in text]


def test_every_command_and_option_is_in_the_reference() -> None:
    parser = build_parser()
    text = pages()["cli.md"]
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert {"operator", "report", "compare", "gate", "docs-reference"} <= set(action.choices)
    for name, sub in action.choices.items():
        section = text.split(f"## csibench {name}\n", 1)
        assert len(section) == 2, f"csibench {name} has no section in docs/reference/cli.md"
        body = section[1].split("\n## ", 1)[0]
        for option in (o for a in sub._actions for o in a.option_strings if o not in ("-h", "--help")):
            assert option in body, f"csibench {name} {option} is not in docs/reference/cli.md"
        assert "Exit codes:" in body and "| 0 |" in body


# Calls that set a condition, or carry the reason a run or suite stops with, and which argument holds it.
REASON_CALLS = frozenset({"condition", "set_condition", "_conditions", "ready", "fail", "Outcome",
                          "ThresholdVerdict", "SuiteFailed", "PlanError", "RunAborted", "Stop", "RunVerdict"})
ENUMS = {"ConditionReason": {m.name: m.value for m in ConditionReason}, "Change": {m.name: m.value for m in Change},
         "SuiteReason": {n: getattr(SuiteReason, n) for n in vars(SuiteReason) if n.isupper()}}
CAMEL = re.compile(r"^[A-Z][a-z]+(?:[A-Z][a-z]*)*$")
NOT_REASONS = {"True", "False", "Unknown"}
# engine/tracker.py has an Outcome of its own: an object's result, whose reasons are object failure reasons
# (Timeout, Deleted, ...), not conditions'.
OBJECT_OUTCOMES = PACKAGE / "engine" / "tracker.py"


def _reasons_in(node: ast.AST) -> Iterator[str]:
    """CamelCase string constants and enum members among a call's arguments (not inside messages)."""
    if isinstance(node, ast.JoinedStr):
        return
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and CAMEL.match(node.value):
        yield node.value
    elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ENUMS:
        yield ENUMS[node.value.id][node.attr]
    else:
        for child in ast.iter_child_nodes(node):
            yield from _reasons_in(child)


def reasons_in_code() -> dict[str, str]:
    found: dict[str, str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in REASON_CALLS and not (name == "Outcome" and path == OBJECT_OUTCOMES):
                for arg in node.args:
                    for reason in _reasons_in(arg):
                        found.setdefault(reason, f"{path.relative_to(REPO_ROOT)}:{node.lineno}")
    return {reason: where for reason, where in found.items() if reason not in NOT_REASONS}


def test_every_condition_reason_used_in_code_is_in_the_reference() -> None:
    found = reasons_in_code()
    # The reader must see the literals as well as the enums: these are set as literals in their modules.
    assert {"WarningsFound", "ThresholdsBroken", "StatusTooLarge", "NameTaken", "ManifestRejected"} <= set(found)
    text = pages()["conditions.md"]
    missing = {reason: where for reason, where in found.items() if f"| `{reason}` |" not in text}
    assert not missing, f"condition reasons not in docs/reference/conditions.md (add them to reference.py): {missing}"
    every_enum = {value for members in ENUMS.values() for value in members.values()}
    assert not [value for value in every_enum if f"| `{value}` |" not in text]


def test_every_preflight_check_set_in_code_is_in_the_reference() -> None:
    checks = {keyword.value.value for path in sorted(PACKAGE.rglob("*.py"))
              for node in ast.walk(ast.parse(path.read_text(), str(path))) if isinstance(node, ast.Call)
              for keyword in node.keywords
              if keyword.arg == "check" and isinstance(keyword.value, ast.Constant)
              and isinstance(keyword.value.value, str)}
    assert {"ClientThrottling", "DataPathCache", "NotACSIDriver"} <= checks
    section = pages()["conditions.md"].split("## BenchmarkRun: preflight findings", 1)[1]
    assert not [check for check in checks if f"| `{check}` |" not in section]
