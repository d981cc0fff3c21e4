"""The tests run the runtime dependencies the operator image ships: every package requirements.lock pins is installed
here at exactly that version (scripts/bootstrap installs with the lock as constraints). The wheel test borrows these
installed dependencies, so this is what keeps it testing the image's combination."""

from __future__ import annotations

import re
from importlib import metadata

from localcluster.launcher import REPO_ROOT


def canonicalize_name(name: str) -> str:
    """A distribution's name as PEP 503 compares them ("Prometheus_Client" is "prometheus-client")."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins() -> dict[str, str]:
    lines = (REPO_ROOT / "requirements.lock").read_text().splitlines()
    pairs = [line.split("==", 1) for line in lines if line.strip() and not line.startswith("#")]
    return {canonicalize_name(name): version.strip() for name, version in pairs}


def test_every_pinned_runtime_dependency_is_installed_at_its_pin() -> None:
    pinned = pins()
    assert {"kopf", "kubernetes", "pydantic", "prometheus-client"} <= set(pinned)
    installed = {canonicalize_name(d.metadata["Name"]): d.version for d in metadata.distributions()}
    differ = {name: (version, installed.get(name)) for name, version in pinned.items()
              if installed.get(name) != version}
    assert differ == {}, f"(pinned, installed): {differ}; run scripts/bootstrap after changing requirements.lock"
