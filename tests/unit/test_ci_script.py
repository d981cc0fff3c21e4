"""The test command CI runs must fail when pytest collects no test (pytest exits 5), never pass."""

from __future__ import annotations

import subprocess

from localcluster.launcher import REPO_ROOT


def test_the_test_command_fails_when_no_test_runs() -> None:
    # One file to collect, not all 1,500 tests (7 s of CPU): the exit-5 rule is the same for any arguments.
    completed = subprocess.run(["bash", str(REPO_ROOT / "scripts" / "test"), "-q", "-k", "no_such_test_anywhere",
                                "tests/unit/test_ci_script.py"],
                               capture_output=True, text=True, cwd=REPO_ROOT, timeout=600)
    assert completed.returncode == 1, completed.stdout[-2000:] + completed.stderr[-2000:]
    assert "pytest collected no tests; failing" in completed.stderr


def test_ci_runs_exactly_the_readme_test_command() -> None:
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    readme = (REPO_ROOT / "README.md").read_text()
    assert "exec scripts/test" in ci
    assert "scripts/test    # everything CI runs" in readme
