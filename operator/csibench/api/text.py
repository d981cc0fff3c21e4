"""How numbers and a tool's words read in status and reports (pure): durations as published tables write them,
and bounded messages.

Status fields are bounded, so messages are cut; a cut in the middle of a word ("...io_u error on file ") reads as
a broken message. ``shorten`` cuts at a word boundary and says that it cut. Tools repeat one line per job or per
request (fio writes the same ``io_u error`` once per I/O in flight, each with its own offset): ``collapse_lines``
counts lines of the same shape instead of repeating them, and puts the tool's last line first, because a tool's
last line is its most specific (fio's ``err=28/... error=No space left on device``) and a message cut further
down the line (a condition, a failure reason) then still holds it.
"""

from __future__ import annotations

import re

ELLIPSIS = "…"
_NUMBER = re.compile(r"\d+")


def shorten(text: str, limit: int) -> str:
    """``text`` if it fits, else cut at the last space before ``limit`` (or at ``limit`` when a single word is
    longer), ending with an ellipsis, within ``limit`` characters."""
    if len(text) <= limit:
        return text
    room = max(limit - len(ELLIPSIS), 0)
    cut = text.rfind(" ", 0, room + 1)
    head = text[:cut] if cut > room // 2 else text[:room]
    return head.rstrip(" ;,:") + ELLIPSIS


def shape(line: str) -> str:
    """What stays of a line when its numbers are ignored: two lines of one shape say the same thing (the same
    error on another offset, file number or pid)."""
    return _NUMBER.sub("#", line)


def collapse_lines(lines: list[str], limit: int) -> str:
    """One message from a tool's lines: blank lines dropped, lines of one shape said once with their count
    ("8× fio: io_u error ..."), the shape of the last line first, the others in their order; within ``limit``."""
    kept = [line.strip() for line in lines if line.strip()]
    if not kept:
        return ""
    counts: dict[str, int] = {}
    first: dict[str, str] = {}
    for line in kept:
        key = shape(line)
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, line)
    last = shape(kept[-1])
    order = [last] + [key for key in counts if key != last]
    parts = [(f"{counts[key]}× " if counts[key] > 1 else "") + (kept[-1] if key == last else first[key])
             for key in order]
    return shorten("; ".join(parts), limit)


def human_duration(seconds: float) -> str:
    """'10m 30s', '5h 00m 52s', '3.2s' — the way published benchmark tables read."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m {secs:02d}s"
    return f"{minutes}m {secs:02d}s"
