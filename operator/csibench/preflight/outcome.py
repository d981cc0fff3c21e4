"""What a preflight means for the run: its ``Preflight`` condition, and whether Enforce stops it (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from csibench.api.models import Finding, Machinery, PreflightMode, Severity

CONDITION = "Preflight"


@dataclass(frozen=True)
class Outcome:
    status: str  # "True" (nothing distorts the run), "False" (Warnings), "Unknown" (not looked or not visible)
    reason: str
    message: str
    stop: str | None = None  # Enforce: why the run ends before creating anything


def outcome(mode: PreflightMode, findings: list[Finding], machinery: Machinery | None) -> Outcome:
    if mode == PreflightMode.SKIP:
        return Outcome("Unknown", "Skipped", "preflight: Skip; the CSI machinery was not checked")
    warnings = [f for f in findings if f.severity == Severity.WARNING]
    if warnings:
        names = ", ".join(sorted({f.check for f in warnings}))
        message = (f"{len(warnings)} warning(s) ({names}): the numbers will likely be distorted; "
                   f"see status.preflight. First: {warnings[0].message}")
        stop = (f"preflight: Enforce and {len(warnings)} warning(s) found, so nothing was created. "
                f"{warnings[0].check}: {warnings[0].message}") if mode == PreflightMode.ENFORCE else None
        return Outcome("False", "WarningsFound", message, stop)
    if machinery is None or not machinery.visible:
        note = machinery.note if machinery is not None else "no discovery"
        return Outcome("Unknown", "MachineryNotVisible", f"no warning, but the CSI machinery was not visible: {note}")
    infos = len(findings)
    return Outcome("True", "Passed", f"no warning; {infos} info finding(s)" if infos else "no finding")
