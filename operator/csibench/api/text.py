"""How numbers and a tool's words read in status and reports (pure): durations as published tables write them,
times in the unit that shows their digits (microseconds below a millisecond), numbers with the digits that tell
them from the bound they are held against, and bounded messages. Only what is shown is rounded: status, reports
and metrics keep every value at full precision.

Status fields are bounded, so messages are cut; a cut in the middle of a word ("...io_u error on file ") reads as
a broken message. ``shorten`` cuts at a word boundary and says that it cut. Tools repeat one line per job or per
request (fio writes the same ``io_u error`` once per I/O in flight, each with its own offset): ``collapse_lines``
counts lines of the same shape instead of repeating them, keeps their order, and when it must cut, cuts from the
middle so that the tool's last line (fio's ``err=28/... error=No space left on device``) stays.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pydantic import ValidationError

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
    """One message from a tool's lines, in their order: blank lines dropped, lines of one shape said once with
    their count ("8× fio: io_u error ... (numbers differ)" when their numbers do); when the whole is longer than
    ``limit``, lines from the middle give way so that the first and the tool's last line (its summary) stay."""
    kept = [line.strip() for line in lines if line.strip()]
    counts: dict[str, int] = {}
    first: dict[str, str] = {}
    varied: set[str] = set()
    for line in kept:
        key = shape(line)
        counts[key] = counts.get(key, 0) + 1
        if first.setdefault(key, line) != line:
            varied.add(key)
    parts = [(f"{counts[key]}× " if counts[key] > 1 else "") + first[key]
             + (" (numbers differ)" if key in varied else "") for key in counts]
    whole = "; ".join(parts)
    if len(whole) <= limit or len(parts) < 3:
        return shorten(whole, limit)
    last = shorten(parts[-1], limit // 2)
    head: list[str] = []
    for part in parts[:-1]:
        if len("; ".join([*head, part, ELLIPSIS, last])) > limit:
            break
        head.append(part)
    return shorten("; ".join([*head, ELLIPSIS, last]), limit)


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


def plain_number(value: float) -> str:
    """The shortest text that reads back as ``value`` exactly ('5.999999999', '6', '0.00012', '1e-07'): a bound
    as the user wrote it, never rounded into its neighbour."""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def seconds_text(seconds: float, digits: int = 3) -> str:
    """'125 µs', '12.5 ms', '3 s': a time in the unit that shows its digits (µs below 1 ms, ms below 1 s)."""
    for scale, unit, below in ((1e6, "µs", 1e-3), (1e3, "ms", 1.0)):
        if abs(seconds) < below:
            shown = f"{seconds * scale:.{digits}g}"
            if "e" not in shown and abs(float(shown)) < 1000:  # 999.96 µs shows as 1 ms, never as "1e+03 µs"
                return f"{shown} {unit}"
    return f"{seconds:.{digits}g} s"


def distinguishing(value: float, others: list[float], shown: Callable[[float, int], str]) -> tuple[str, list[str]]:
    """``value`` and ``others`` written by ``shown(x, significant digits)`` with the fewest digits (at least 4)
    that keep each other number's text equal to the value's exactly when the numbers are equal: 6 against a max
    of 5.999999999 reads '6 > 5.999999999', never '6 > 6'."""
    for digits in range(4, 18):
        texts = [shown(other, digits) for other in others]
        mine = shown(value, digits)
        if all((text == mine) == (other == value) for text, other in zip(texts, others, strict=True)):
            return mine, texts
    return shown(value, 17), [shown(other, 17) for other in others]


def validation_problems(error: ValidationError, root: str = "spec") -> str:
    """'spec.targetNamespace: ...; spec.labels: ...' (pydantic's own text is multi-line): one line a status
    condition can carry, for a run's spec and a suite's cells alike."""
    return "; ".join(f"{'.'.join(str(part) for part in (root, *item['loc']))}: "
                     f"{item['msg'].removeprefix('Value error, ')}" for item in error.errors())


def bound_document(value: object, limit: int, path: str = "status") -> tuple[object, list[str]]:
    """A copy of a JSON document (dicts, lists, scalars) whose every string, keys included, is at most ``limit``
    characters (``shorten``), and where it cut: ``["status.collection[0].message (2,000,133 characters)", ...]``.
    The safety net under every source's own bound: text from outside (Prometheus, a driver, fio, an Event) that
    some path forgot to shorten still cannot make a status write too large."""
    cut: list[str] = []

    def walk(item: object, where: str) -> object:
        if isinstance(item, str):
            if len(item) > limit:
                cut.append(f"{where} ({len(item):,} characters)")
                return shorten(item, limit)
            return item
        if isinstance(item, dict):
            bounded: dict[str, object] = {}
            for key, inner in item.items():
                name = str(key)
                if len(name) > limit:
                    cut.append(f"{where} key ({len(name):,} characters)")
                    name = shorten(name, limit)
                bounded[name] = walk(inner, f"{where}.{name if len(name) <= 40 else name[:40] + ELLIPSIS}")
            return bounded
        if isinstance(item, list):
            return [walk(inner, f"{where}[{index}]") for index, inner in enumerate(item)]
        return item

    return walk(value, path), cut
