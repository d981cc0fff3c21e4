"""Who may import test code, held: read from the source with ``ast`` (also imports inside functions and under
TYPE_CHECKING).

- A test module never imports another test module (nor a conftest): what tests share lives in ``tests/support/``.
- ``bench/``, ``localcluster/`` and the operator import nothing from ``tests/``: the benchmarks are not tests, and
  what they share with the tests (the local cluster's client view, manifests, the operator process, BenchmarkRun
  helpers) lives in ``localcluster/``.
"""

from __future__ import annotations

import ast
from pathlib import Path

from localcluster.launcher import REPO_ROOT
from tests.support.source_tree import write_tree

SHARED = "tests.support"
NO_TEST_CODE = ("bench", "localcluster", "operator")


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    if parts[0] == "operator":  # the operator's package is importable as csibench (pyproject: pythonpath)
        parts = parts[1:]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, root: Path) -> set[str]:
    """The absolute names of the modules (or their members) a file imports, relative imports resolved."""
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the file's package, one level up per dot after the first
                base = ".".join([*package[:len(package) - node.level + 1], *([base] if base else [])])
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def is_test_code(name: str) -> bool:
    return name == "tests" or name.startswith("tests.")


def is_shared(name: str) -> bool:
    return name == SHARED or name.startswith(f"{SHARED}.")


def forbidden_imports(root: Path = REPO_ROOT) -> list[str]:
    """'tests/unit/test_x.py -> tests.unit.test_run.spec' for every import of test code that the rules forbid."""
    found = []
    for path in sorted((root / "tests").rglob("*.py")):
        found += [f"{path.relative_to(root)} -> {name}" for name in sorted(imports(path, root))
                  if is_test_code(name) and not is_shared(name)]
    for top in NO_TEST_CODE:
        for path in sorted((root / top).rglob("*.py")):
            found += [f"{path.relative_to(root)} -> {name}" for name in sorted(imports(path, root))
                      if is_test_code(name)]
    return found


def test_test_modules_import_only_tests_support_and_nothing_else_imports_tests() -> None:
    assert (REPO_ROOT / "tests" / "support" / "fake_runs.py").exists()
    assert forbidden_imports() == []


def test_the_check_sees_a_test_importing_a_test_bench_importing_support_and_a_relative_import(
        tmp_path: Path) -> None:
    write_tree(tmp_path, {
        "tests/__init__.py": "",
        "tests/support/__init__.py": "",
        "tests/support/helpers.py": "from tests.support import other\n",
        "tests/unit/__init__.py": "",
        "tests/unit/test_a.py": "from tests.support.helpers import spec\nfrom tests.unit.test_b import run\n",
        "tests/unit/test_b.py": "def f():\n    from . import test_a\n",
        "tests/integration/conftest.py": "import tests.integration.test_c\n",
        "tests/integration/test_c.py": "from tests import support\n",
        "bench/harness.py": "from tests.support import runs\n",
        "localcluster/kube.py": "from localcluster import manifests\n",
        "operator/csibench/__init__.py": "",
    })
    assert forbidden_imports(tmp_path) == [
        "tests/integration/conftest.py -> tests.integration.test_c",
        "tests/unit/test_a.py -> tests.unit.test_b.run",
        "tests/unit/test_b.py -> tests.unit.test_a",
        "bench/harness.py -> tests.support.runs",
    ]
