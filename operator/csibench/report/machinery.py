"""The CSI machinery and preflight findings in reports, and what differs between two runs' machinery (pure).

Two numbers are only comparable when they came from the same machinery: ``differences`` lists every component
whose version or result-changing flags differ (e.g. the snapshot-controller's client limits), so ``compare``
can say so next to the ratios.
"""

from __future__ import annotations

from typing import Any

SHOWN_FLAGS = ("kube-api-qps", "kube-api-burst", "worker-threads", "workers", "timeout")


def _settings(component: dict[str, Any]) -> dict[str, str]:
    """The values the component runs with: flags as set, else upstream defaults."""
    return {**(component.get("defaults") or {}), **(component.get("flags") or {})}


def _summary(component: dict[str, Any]) -> str:
    settings = _settings(component)
    shown = " ".join(f"{name}={settings[name]}" for name in SHOWN_FLAGS if name in settings)
    version = component.get("version") or "?"
    return f"{component['kind']} {version} ({component.get('namespace', '?')}: {shown})"


def machinery_lines(environment: dict[str, Any]) -> list[str]:
    machinery = environment.get("machinery")
    if not machinery:
        return []
    if not machinery.get("visible"):
        return [f"CSI machinery: not visible ({machinery.get('note') or 'no reason recorded'})"]
    components = machinery.get("components") or []
    if not components:
        return [f"CSI machinery of {machinery.get('driver')}: none found in the cluster"]
    return [f"CSI machinery of {machinery.get('driver')}: " + "; ".join(_summary(c) for c in components)]


def finding_lines(findings: list[dict[str, Any]]) -> list[str]:
    return [f"preflight {f.get('severity', '?')} {f.get('check', '?')}: {f.get('message', '')}" for f in findings]


def _by_kind(environment: dict[str, Any]) -> dict[str, dict[str, Any]]:
    machinery = environment.get("machinery") or {}
    return {f"{c['kind']} ({c.get('namespace', '?')})": c for c in machinery.get("components") or []}


def differences(environment_a: dict[str, Any], environment_b: dict[str, Any]) -> list[str]:
    """'snapshot-controller (kube-system): kube-api-qps 5 -> 100, ...' for each component that differs."""
    machinery_a, machinery_b = environment_a.get("machinery"), environment_b.get("machinery")
    if not machinery_a or not machinery_b or not machinery_a.get("visible") or not machinery_b.get("visible"):
        return [] if machinery_a == machinery_b else ["CSI machinery recorded for only one run, or not visible: "
                                                      "cannot tell whether they ran the same"]
    a, b = _by_kind(environment_a), _by_kind(environment_b)
    lines = []
    for key in sorted(set(a) | set(b)):
        if key not in a or key not in b:
            lines.append(f"{key}: only in {'A' if key in a else 'B'}")
            continue
        changes = []
        if a[key].get("version") != b[key].get("version"):
            changes.append(f"version {a[key].get('version')} -> {b[key].get('version')}")
        settings_a, settings_b = _settings(a[key]), _settings(b[key])
        changes += [f"{name} {settings_a.get(name, '-')} -> {settings_b.get(name, '-')}"
                    for name in sorted(set(settings_a) | set(settings_b))
                    if settings_a.get(name) != settings_b.get(name)]
        if changes:
            lines.append(f"{key}: " + ", ".join(changes))
    return lines
