"""When a data-path row's pods did not run together: the rule and its words, shared by the row's flag and Warning
(the engine) and the report's note, so they never disagree.

A row sums its pods' bandwidth and IOPS as if they ran at once. fio's own clock says when each pod measured; when
the latest start is more than SKEW_SHARE of the runtime after the earliest, the sums add up pods that overlapped
for only part of it, and the row says so (``skewed``) rather than leave the sum unqualified.
"""

from __future__ import annotations

SKEW_SHARE = 0.1  # of the runtime: pods whose measured starts spread wider did not run together


def is_skewed(skew_seconds: float | None, runtime_seconds: float) -> bool | None:
    """Whether the starts spread over more than SKEW_SHARE of the runtime (None: not known)."""
    if skew_seconds is None or runtime_seconds <= 0:
        return None
    return skew_seconds > SKEW_SHARE * runtime_seconds


def skew_message(skew_seconds: float, together_seconds: float, runtime_seconds: float) -> str:
    return (f"pods did not run together: their measured starts spread over {skew_seconds:.2f}s, more than "
            f"{SKEW_SHARE:.0%} of the {runtime_seconds:g}s runtime, and all of them ran at once for "
            f"{together_seconds:.2f}s; the summed MiB/s and IOPS overstate what the storage served at any one moment")
