"""When a BenchmarkSchedule is due: the cron expression, parsed exactly, and its times in UTC.

The grammar is CronJob's (robfig/cron's standard parser): five fields (minute, hour, day of month, month, day of
week) of ``*``, ``?``, numbers, ranges ``a-b``, steps ``/n`` and comma lists, month and day names (``JAN``,
``MON``), day of week 0-6 (0 is Sunday); day of month and day of week both restricted match when either does,
and ``*/n`` counts as restricted (robfig/cron's rule, not Vixie cron's). Stricter than robfig/cron in one way: a
step larger than its field's range (``*/90`` for minutes, which robfig runs hourly) is refused. The descriptors
``@yearly`` (``@annually``), ``@monthly``, ``@weekly``, ``@daily`` (``@midnight``) and ``@hourly`` too. One
extension, because a probe every 30 s and a test of a schedule need what CronJob has not: ``@every <n>s|m|h``
(10 s to 24 h), whose times are the multiples of the interval since the Unix epoch, so they are the same after an
operator restart. Times are UTC. The admission pattern (``SCHEDULE_PATTERN``) only shapes the string; ``parse``
is the exact check, in code, and its ``CronError`` says what is wrong.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

SCHEDULE_MAX = 128
SCHEDULE_PATTERN = r"^(@[a-z]+( [0-9]+[smh])?|[-0-9A-Za-z*?/,]+( [-0-9A-Za-z*?/,]+){4})$"
EVERY_MIN_SECONDS, EVERY_MAX_SECONDS = 10, 24 * 3600
SEARCH_YEARS = 5  # a schedule with no time in five years ("0 0 30 2 *") has none
DESCRIPTORS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
               "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
MONTHS = {name: index for index, name in enumerate(calendar.month_abbr) if name}
DAYS = {name: (index + 1) % 7 for index, name in enumerate(calendar.day_abbr)}  # Mon=1 ... Sun=0
_UNITS = {"s": 1, "m": 60, "h": 3600}


class CronError(ValueError):
    """A schedule that is not one: the message says which field and why."""


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: dict[str, int]


_FIELDS = (_Field("minute", 0, 59, {}), _Field("hour", 0, 23, {}), _Field("day of month", 1, 31, {}),
           _Field("month", 1, 12, {name.upper(): index for name, index in MONTHS.items()}),
           _Field("day of week", 0, 6, {name.upper(): index for name, index in DAYS.items()}))


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule: the allowed values of each field, or an interval (``@every``)."""

    text: str
    minutes: frozenset[int] = frozenset()
    hours: frozenset[int] = frozenset()
    days: frozenset[int] = frozenset()
    months: frozenset[int] = frozenset()
    weekdays: frozenset[int] = frozenset()  # 0 = Sunday
    any_day: bool = True  # day of month or day of week is '*': both must match; else either
    every_seconds: int | None = None

    def next_after(self, moment: datetime) -> datetime | None:
        """The first time strictly after ``moment`` (UTC, whole seconds for @every, minutes otherwise), or None
        when there is none within five years."""
        moment = moment.astimezone(UTC)
        if self.every_seconds is not None:
            seconds = int(moment.timestamp()) // self.every_seconds * self.every_seconds + self.every_seconds
            return datetime.fromtimestamp(seconds, UTC)
        at = moment.replace(second=0, microsecond=0) + timedelta(minutes=1)
        limit = at.year + SEARCH_YEARS
        while at.year <= limit:
            if at.month not in self.months:
                year, month = (at.year + 1, 1) if at.month == 12 else (at.year, at.month + 1)
                at = at.replace(year=year, month=month, day=1, hour=0, minute=0)
            elif not self._day_matches(at):
                at = (at + timedelta(days=1)).replace(hour=0, minute=0)
            elif at.hour not in self.hours:
                at = (at + timedelta(hours=1)).replace(minute=0)
            elif at.minute not in self.minutes:
                at += timedelta(minutes=1)
            else:
                return at
        return None

    def _day_matches(self, at: datetime) -> bool:
        in_month, in_week = at.day in self.days, (at.weekday() + 1) % 7 in self.weekdays
        return (in_month and in_week) if self.any_day else (in_month or in_week)


def parse(text: str) -> Schedule:
    """The schedule ``text`` says, or a ``CronError`` naming the field that is wrong."""
    if len(text) > SCHEDULE_MAX:
        raise CronError(f"a schedule is at most {SCHEDULE_MAX} characters")
    stripped = text.strip()
    if stripped.startswith("@every"):
        return _every(text, stripped)
    if stripped.startswith("@"):
        if stripped not in DESCRIPTORS:
            raise CronError(f"unknown descriptor {stripped!r}: one of {', '.join(DESCRIPTORS)} or @every <n>s|m|h")
        stripped = DESCRIPTORS[stripped]
    fields = stripped.split()
    if len(fields) != len(_FIELDS):
        raise CronError(f"expected 5 fields (minute hour day-of-month month day-of-week), found {len(fields)}")
    values, starred = [], []
    for field, value in zip(_FIELDS, fields, strict=True):
        allowed, star = _parse_field(field, value)
        values.append(allowed)
        starred.append(star)
    return Schedule(text=text, minutes=values[0], hours=values[1], days=values[2], months=values[3],
                    weekdays=values[4], any_day=starred[2] or starred[4])


def _every(text: str, stripped: str) -> Schedule:
    match = re.fullmatch(r"@every ([0-9]{1,6})([smh])", stripped)
    if match is None:
        raise CronError(f"{stripped!r}: @every takes one whole number with a unit, e.g. '@every 30s', '@every 5m'")
    seconds = int(match.group(1)) * _UNITS[match.group(2)]
    if not EVERY_MIN_SECONDS <= seconds <= EVERY_MAX_SECONDS:
        raise CronError(f"@every is {EVERY_MIN_SECONDS} s to {EVERY_MAX_SECONDS // 3600} h, not {seconds} s")
    return Schedule(text=text, every_seconds=seconds)


def _parse_field(field: _Field, text: str) -> tuple[frozenset[int], bool]:
    """The values of one field, and whether it is unrestricted ('*' or '?' without a step)."""
    allowed: set[int] = set()
    starred = False
    for part in text.split(","):
        range_text, _, step_text = part.partition("/")
        step = 1
        if step_text:
            step = _number(field, step_text, digits=3)
            if not 1 <= step <= field.high - field.low + 1:
                raise CronError(f"{field.name}: step {step} is not between 1 and {field.high - field.low + 1}")
        if range_text in ("*", "?"):
            low, high = field.low, field.high
            starred = starred or step == 1
        else:
            low_text, dash, high_text = range_text.partition("-")
            low = _number(field, low_text)
            high = _number(field, high_text) if dash else (field.high if step_text else low)
        if not field.low <= low <= high <= field.high:
            raise CronError(f"{field.name}: {part!r} is outside {field.low}-{field.high} or runs backwards")
        allowed.update(range(low, high + 1, step))
    return frozenset(allowed), starred


def _number(field: _Field, text: str, digits: int = 2) -> int:
    if text.upper() in field.names:
        return field.names[text.upper()]
    if not re.fullmatch(f"[0-9]{{1,{digits}}}", text):
        raise CronError(f"{field.name}: {text!r} is not a number" + (
            f" or a name ({', '.join(list(field.names)[:3])}, ...)" if field.names else ""))
    return int(text)


@dataclass(frozen=True)
class Due:
    """What is due at ``now``: the latest time not yet started (None: nothing), how many earlier ones it passes
    over (capped at ``TOO_MANY_MISSED`` + 1: "over 100"), and the next time after now."""

    latest: datetime | None
    passed_over: int
    next: datetime | None


TOO_MANY_MISSED = 100  # as CronJob: past this many missed times, counting stops and the controller says so


def due(schedule: Schedule, since: datetime, now: datetime, deadline_seconds: int | None = None) -> Due:
    """The times after ``since`` up to ``now``, as CronJob sees them: only the latest starts. With a starting
    deadline (CronJob's startingDeadlineSeconds) only times within it of ``now`` are looked at, so a time
    missed for longer than that (the operator down, a run still active under Forbid) is never started."""
    start = since if deadline_seconds is None else max(since, now - timedelta(seconds=deadline_seconds))
    latest, count = None, 0
    at = schedule.next_after(start)
    while at is not None and at <= now:
        latest, count = at, count + 1
        if count > TOO_MANY_MISSED:
            latest = _last_up_to(schedule, at, now)
            break
        at = schedule.next_after(at)
    return Due(latest=latest, passed_over=max(count - 1, 0), next=schedule.next_after(now))


LOOK_BACK = (timedelta(hours=1), timedelta(days=1), timedelta(days=31), timedelta(days=366))


def _last_up_to(schedule: Schedule, after: datetime, now: datetime) -> datetime:
    """The last time up to ``now``, from a time ``after`` that is one: walked forward from the shortest window
    before ``now`` that holds a time, so a schedule suspended for months costs a day's times, not months'."""
    if schedule.every_seconds is not None:
        return datetime.fromtimestamp(int(now.timestamp()) // schedule.every_seconds * schedule.every_seconds, UTC)
    start = after
    for window in LOOK_BACK:
        candidate = schedule.next_after(max(after, now - window))
        if candidate is not None and candidate <= now:
            start = candidate
            break
    latest, at = start, schedule.next_after(start)
    while at is not None and at <= now:
        latest, at = at, schedule.next_after(at)
    return latest
