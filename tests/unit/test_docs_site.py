"""The documentation site builds in strict mode, and strict mode really fails a broken link or an unlisted page
(scripts/test runs the same build; mkdocs.yml)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from localcluster.launcher import REPO_ROOT

MKDOCS = REPO_ROOT / ".venv" / "bin" / "mkdocs"


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(MKDOCS), "build", "--strict", "--site-dir", str(site)], cwd=root,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    built = build(REPO_ROOT, tmp_path / "site")
    assert built.returncode == 0, built.stdout + built.stderr
    assert (tmp_path / "site" / "reference" / "benchmarkrun" / "index.html").exists()


# Three defects in one copy of the site: strict mode lists every warning before it aborts, so one build (5-15 s of
# CPU, a minute on a busy machine) shows that each is caught, where three builds showed one each.
DEFECTS = [
    ("guides/suites.md", "\nSee [nowhere](no-such-page.md).\n", "no-such-page.md"),
    ("guides/data-path.md", "\nSee [a missing section](suites.md#no-such-anchor).\n", "no-such-anchor"),
    ("orphan.md", "# Not in the navigation\n", "orphan.md"),
]


def test_a_broken_link_a_missing_anchor_and_an_unlisted_page_each_fail_the_build(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    shutil.copytree(REPO_ROOT / "docs", root / "docs")
    shutil.copy(REPO_ROOT / "mkdocs.yml", root / "mkdocs.yml")
    for page, text, _ in DEFECTS:
        with (root / "docs" / page).open("a") as out:
            out.write(text)
    built = build(root, tmp_path / "site")
    output = built.stdout + built.stderr
    # Each one a warning of its own (a name in an INFO line would not fail the build): three, each named.
    assert built.returncode != 0 and f"Aborted with {len(DEFECTS)} warnings" in output, output
    assert [complaint for _, _, complaint in DEFECTS if complaint not in output] == [], output


def test_the_readme_is_a_front_page_whose_links_resolve() -> None:
    """The README stays a front page (at most 250 lines, issue 50) and every link in it reaches a file, since the
    site's strict build does not read the README."""
    readme = (REPO_ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    assert len(targets) > 10
    missing = [target for target in targets if "://" not in target and not (REPO_ROOT / target).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"
