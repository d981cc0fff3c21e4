"""The package's layers, held: every import of a csibench module, read from the source (also those under
TYPE_CHECKING and inside functions), must go to the module's own layer or one below it, and no group of modules may
import each other in a circle.

    api, metrics  (leaves: import nothing of csibench but their own layer)
      ↑
    kube
      ↑
    preflight, report   (beside the engine: they read api and kube, never the engine)
    observe   (Prometheus over a step's window: reads api only)
      ↑
    engine   (preflight too: the run decides what its findings mean)
    suite, schedule   (beside the engine: they create runs and read them; a schedule reads report's history)
      ↑
    handlers, cli, __main__, reference   (reference: the docs site's generated pages; cli passes it the parser)

Inside the engine, the steps are siblings (as kopf holds independence inside its core): a step module
(``engine/steps/<step>.py``, or a step package ``engine/steps/<step>/``) imports the engine's shared modules but
never another step; nothing outside ``engine/steps/`` but the registry (``engine/catalog.py``) imports a step; and
the package never imports ``localcluster`` (the test cluster), not even inside a function.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from localcluster.launcher import REPO_ROOT
from tests.support.source_tree import write_tree

PACKAGE = REPO_ROOT / "operator" / "csibench"
TOP = frozenset({"handlers", "cli", "__main__", "reference"})
ALLOWED: Mapping[str, frozenset[str]] = {
    "csibench": frozenset(),  # the package's __init__: importing any layer must not load another
    "api": frozenset(),
    "metrics": frozenset(),
    "kube": frozenset({"api", "metrics"}),
    "preflight": frozenset({"api", "kube", "metrics"}),
    "report": frozenset({"api", "kube"}),
    "observe": frozenset({"api"}),
    "engine": frozenset({"api", "kube", "metrics", "preflight", "observe"}),
    "suite": frozenset({"api", "kube", "metrics"}),
    "schedule": frozenset({"api", "kube", "metrics", "report"}),  # report: history's change point on its runs
}


def module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, module: str, known: Iterable[str]) -> set[str]:
    """The csibench modules a file imports (``from csibench.x import y`` counts as csibench.x.y when that is a
    module, else as csibench.x; relative imports are resolved against the file's own package)."""
    modules = set(known)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[:len(package) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            if base.split(".")[0] != "csibench":
                continue
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in modules else base)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "csibench")
    return found


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    files = {module_name(path, package): path for path in sorted(package.rglob("*.py"))}
    return {name: imported(path, name, files) for name, path in files.items()}


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "csibench"


def upward_imports(graph: Mapping[str, set[str]]) -> list[str]:
    """'csibench.report.render -> csibench.engine.catalog' for each import that leaves the allowed layers."""
    found = []
    for module, targets in sorted(graph.items()):
        own = layer(module)
        if own in TOP:
            continue
        allowed = ALLOWED.get(own)
        for target in sorted(targets):
            other = layer(target)
            if other != own and (allowed is None or other not in allowed):
                found.append(f"{module} -> {target}")
    return found


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Groups of modules that import each other in a circle (Tarjan's strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in graph.get(module, set()):
            if target not in graph:
                continue
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1 or module in graph.get(module, set()):
                groups.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return groups


def test_every_import_goes_to_the_same_layer_or_below() -> None:
    graph = import_graph()
    assert {"csibench.api.models", "csibench.engine.catalog", "csibench.report.render"} <= set(graph)
    assert upward_imports(graph) == []


def test_no_modules_import_each_other_in_a_circle() -> None:
    assert cycles(import_graph()) == []


def test_the_check_sees_an_upward_import_a_cycle_and_one_under_type_checking(tmp_path: Path) -> None:
    package = tmp_path / "csibench"
    write_tree(package, {
        "__init__.py": "",
        "api/__init__.py": "",
        "api/models.py": "",
        "engine/__init__.py": "",
        "engine/catalog.py": "from csibench.api import models\nfrom csibench.engine import plan\n",
        "engine/plan.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                          "    from csibench.engine.catalog import STEPS\n",
        "report/__init__.py": "",
        "report/render.py": "def title():\n    from csibench.engine.catalog import STEPS\n    return STEPS\n",
        "report/html.py": "from ..engine import catalog\nfrom .render import title\n",
    })
    graph = import_graph(package)
    assert upward_imports(graph) == ["csibench.report.html -> csibench.engine.catalog",
                                     "csibench.report.render -> csibench.engine.catalog"]
    assert "csibench.report.render" in graph["csibench.report.html"]
    assert cycles(graph) == [["csibench.engine.catalog", "csibench.engine.plan"]]


STEPS = "csibench.engine.steps"
REGISTRY = "csibench.engine.catalog"


def step_of(module: str) -> str | None:
    """'csibench.engine.steps.move' -> that step; a module of a step package -> its package; else None (the
    package ``csibench.engine.steps`` itself is no step)."""
    parts = module.split(".")
    return ".".join(parts[:4]) if module.startswith(f"{STEPS}.") else None


def step_imports(graph: Mapping[str, set[str]]) -> list[str]:
    """'a -> b' for each import of a step from another step, or from outside engine/steps but the registry."""
    found = []
    for module, targets in sorted(graph.items()):
        own = step_of(module)
        for target in sorted(targets):
            other = step_of(target)
            if other is None or other == own:
                continue
            if own is not None or module != REGISTRY:
                found.append(f"{module} -> {target}")
    return found


def foreign_imports(package: Path, name: str) -> list[str]:
    """'csibench.x -> localcluster.y' for each import of top-level package ``name`` anywhere in the source (inside
    functions and under TYPE_CHECKING too)."""
    found = []
    for path in sorted(package.rglob("*.py")):
        module = module_name(path, package)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [
                alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            found += [f"{module} -> {target}" for target in targets if target.split(".")[0] == name]
    return found


def test_steps_import_shared_modules_never_each_other_and_only_the_registry_imports_them() -> None:
    graph = import_graph()
    assert {f"{STEPS}.expand", f"{STEPS}.move", f"{STEPS}.volume"} <= set(graph)
    assert f"{STEPS}" in graph[REGISTRY]
    assert step_imports(graph) == []


def test_the_operator_never_imports_the_test_cluster() -> None:
    assert foreign_imports(PACKAGE, "localcluster") == []


def test_the_step_checks_see_a_step_importing_a_step_a_shared_module_importing_one_and_localcluster(
        tmp_path: Path) -> None:
    package = tmp_path / "csibench"
    write_tree(package, {
        "__init__.py": "",
        "engine/__init__.py": "",
        "engine/judges.py": "",
        "engine/catalog.py": "from csibench.engine import steps\n",
        "engine/run.py": "def go():\n    from csibench.engine.steps.move import ENTRIES\n",
        "engine/steps/__init__.py": "",
        "engine/steps/move.py": "from csibench.engine import judges\nfrom csibench.engine.steps import expand\n",
        "engine/steps/expand.py": "from csibench.engine.judges import DONE\n",
        "engine/steps/datapath/__init__.py": "",
        "engine/steps/datapath/fio.py": "",
        "engine/steps/datapath/step.py": "from . import fio\nfrom ..volume import ENTRIES\n",
        "engine/steps/volume.py": "import localcluster.launcher\n",
        "engine/plan.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from localcluster import pki\n",
    })
    assert step_imports(import_graph(package)) == [
        "csibench.engine.run -> csibench.engine.steps.move",
        "csibench.engine.steps.datapath.step -> csibench.engine.steps.volume",
        "csibench.engine.steps.move -> csibench.engine.steps.expand"]
    assert foreign_imports(package, "localcluster") == ["csibench.engine.plan -> localcluster",
                                                        "csibench.engine.steps.volume -> localcluster.launcher"]


def engine_modules_loaded_by(modules: str) -> str:
    """The csibench.engine modules a fresh interpreter has loaded after importing ``modules`` (comma-separated)."""
    code = (f"import sys; import {modules}; "
            "print(sorted(m for m in sys.modules if m.startswith('csibench.engine')))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(PACKAGE.parent)}).stdout.strip()


def test_reading_results_and_checking_the_machinery_loads_no_engine_module() -> None:
    """What the import graph says, seen at run time: a fresh interpreter that imports the reports and the preflight
    checks has no csibench.engine module loaded (nothing reaches the engine through importlib or a package)."""
    assert engine_modules_loaded_by("csibench.report.html, csibench.report.compare, csibench.preflight.checks, "
                                    "csibench.preflight.discovery") == "[]"


def test_the_command_line_loads_no_engine_module_until_a_command_needs_it() -> None:
    """``csibench report``, ``compare``, ``history`` and ``gate`` read status and the stored report: importing the
    command line (the layer map lets it import anything) must not load the engine; the commands that run or check
    a spec import it inside their functions."""
    assert engine_modules_loaded_by("csibench.cli") == "[]"
