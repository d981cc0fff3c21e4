"""The cron grammar a BenchmarkSchedule takes (CronJob's, plus @every): its times, its refusals, and which of
several missed times is due."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime, timedelta

import pytest

from csibench.api.cron import SCHEDULE_PATTERN, TOO_MANY_MISSED, CronError, Schedule, due, parse


def at(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)


def times(expression: str, start: str, count: int) -> list[str]:
    schedule, moment, found = parse(expression), at(start), []
    for _ in range(count):
        nxt = schedule.next_after(moment)
        assert nxt is not None
        found.append(nxt.strftime("%a %Y-%m-%d %H:%M:%S"))
        moment = nxt
    return found


def test_ranges_steps_and_names_give_the_times_cron_gives() -> None:
    # 2026-12-04 is a Friday; 17 is in 9-17, so 17:45 is its last quarter hour, then Monday.
    assert times("*/15 9-17 * * MON-FRI", "2026-12-04 17:40:00", 3) == [
        "Fri 2026-12-04 17:45:00", "Mon 2026-12-07 09:00:00", "Mon 2026-12-07 09:15:00"]
    assert times("5,35 */6 * JAN,dec *", "2026-12-31 18:30:00", 3) == [
        "Thu 2026-12-31 18:35:00", "Fri 2027-01-01 00:05:00", "Fri 2027-01-01 00:35:00"]
    assert times("0 12 29 2 *", "2026-01-01 00:00:00", 1) == ["Tue 2028-02-29 12:00:00"]


def test_day_of_month_and_day_of_week_both_restricted_match_either_as_vixie_cron() -> None:
    # The 13th and every Friday; with a '*' in either, both must match (that is, the other alone decides).
    assert times("0 0 13 * FRI", "2026-11-01 00:00:00", 4) == [
        "Fri 2026-11-06 00:00:00", "Fri 2026-11-13 00:00:00", "Fri 2026-11-20 00:00:00", "Fri 2026-11-27 00:00:00"]
    assert times("0 0 13 * *", "2026-11-01 00:00:00", 1) == ["Fri 2026-11-13 00:00:00"]
    # '*/2' is a restriction (robfig/cron, CronJob): days 1, 3, 5 ... or Sundays.
    assert times("0 0 */2 * 0", "2026-11-01 12:00:00", 3) == [
        "Tue 2026-11-03 00:00:00", "Thu 2026-11-05 00:00:00", "Sat 2026-11-07 00:00:00"]


def test_sunday_is_0_as_in_cronjob_and_descriptors_are_their_cron_lines() -> None:
    assert times("0 0 * * 0", "2026-12-01 00:00:00", 1) == times("0 0 * * SUN", "2026-12-01 00:00:00", 1) == [
        "Sun 2026-12-06 00:00:00"]
    assert times("@weekly", "2026-12-01 00:00:00", 1) == ["Sun 2026-12-06 00:00:00"]
    assert times("@hourly", "2026-12-01 10:00:00", 2) == ["Tue 2026-12-01 11:00:00", "Tue 2026-12-01 12:00:00"]
    assert times("@yearly", "2026-12-01 10:00:00", 1) == times("@annually", "2026-12-01 10:00:00", 1)


def test_every_is_aligned_to_the_epoch_so_a_restart_gives_the_same_times() -> None:
    schedule = parse("@every 30s")
    first = schedule.next_after(at("2026-12-07 10:00:07"))
    assert first == at("2026-12-07 10:00:30")
    assert schedule.next_after(at("2026-12-07 10:00:30")) == at("2026-12-07 10:01:00")
    assert parse("@every 2h").next_after(at("2026-12-07 10:00:00")) == at("2026-12-07 12:00:00")


@pytest.mark.parametrize(("expression", "said"), [
    ("61 * * * *", "minute"), ("* 24 * * *", "hour"), ("* * 0 * *", "day of month"), ("* * * 13 *", "month"),
    ("* * * * 7", "day of week"), ("*/100 * * * *", "step 100"), ("5-1 * * * *", "runs backwards"),
    ("*/0 * * * *", "step 0"),
    ("* * *", "expected 5 fields"), ("* * * * * *", "found 6"), ("@fortnightly", "unknown descriptor"),
    ("@every 5s", "10 s to 24 h"), ("@every 25h", "10 s to 24 h"), ("@every 1.5m", "one whole number"),
    ("* * * FOO *", "not a number"), ("1,,2 * * * *", "not a number"), ("x" * 200, "at most 128"),
])
def test_a_schedule_that_is_not_one_is_refused_naming_what_is_wrong(expression: str, said: str) -> None:
    with pytest.raises(CronError, match=re.escape(said)):
        parse(expression)


def test_the_admission_pattern_shapes_the_string_and_passes_every_valid_example() -> None:
    for good in ("*/15 9-17 * * MON-FRI", "@daily", "@every 30s", "0 0 13 * 5", "? * * * *"):
        assert re.fullmatch(SCHEDULE_PATTERN[1:-1], good), good
    for bad in ("* * * *", "rm -rf /", "@every 30 s", "* * * * *\n"):
        assert not re.fullmatch(SCHEDULE_PATTERN[1:-1], bad), bad


def test_a_schedule_with_no_time_in_five_years_has_none() -> None:
    assert parse("0 0 30 2 *").next_after(at("2026-01-01 00:00:00")) is None
    assert parse("0 0 31 4 *").next_after(at("2026-01-01 00:00:00")) is None


def test_only_the_latest_missed_time_is_due_and_the_others_are_passed_over() -> None:
    schedule = parse("* * * * *")
    found = due(schedule, at("2026-12-07 10:00:00"), at("2026-12-07 10:05:30"))
    assert (found.latest, found.passed_over, found.next) == (at("2026-12-07 10:05:00"), 4, at("2026-12-07 10:06:00"))
    nothing = due(schedule, at("2026-12-07 10:05:00"), at("2026-12-07 10:05:59"))
    assert (nothing.latest, nothing.passed_over) == (None, 0)


def test_a_starting_deadline_looks_only_at_times_within_it() -> None:
    schedule = parse("*/10 * * * *")
    # 10:10 and 10:20 were missed; at 10:21:30 with a 120 s deadline only 10:20 may start
    found = due(schedule, at("2026-12-07 10:00:00"), at("2026-12-07 10:21:30"), deadline_seconds=120)
    assert (found.latest, found.passed_over) == (at("2026-12-07 10:20:00"), 0)
    # at 10:23 it is too late for 10:20 too: nothing starts
    late = due(schedule, at("2026-12-07 10:00:00"), at("2026-12-07 10:23:00"), deadline_seconds=120)
    assert late.latest is None and late.next == at("2026-12-07 10:30:00")


def test_the_latest_of_months_of_missed_times_is_found_without_walking_them_all() -> None:
    calls = 0

    class Counted(Schedule):
        def next_after(self, moment: datetime) -> datetime | None:
            nonlocal calls
            calls += 1
            return super().next_after(moment)

    schedule = Counted(**{f.name: getattr(parse("* * * * *"), f.name) for f in dataclasses.fields(Schedule)})
    found = due(schedule, at("2026-06-07 00:00:00"), at("2026-12-07 10:05:30"))
    assert found.latest == at("2026-12-07 10:05:00") and found.passed_over == TOO_MANY_MISSED
    assert calls < 24 * 60, calls  # at most the last day's minutes, not half a year's (262,000)


def test_over_a_hundred_missed_times_still_give_the_latest() -> None:
    schedule = parse("* * * * *")
    start = at("2026-12-07 00:00:00")
    found = due(schedule, start, start + timedelta(hours=5, seconds=10))
    assert found.latest == at("2026-12-07 05:00:00") and found.passed_over == TOO_MANY_MISSED
    every = due(parse("@every 10s"), start, start + timedelta(hours=1, seconds=5))
    assert every.latest == at("2026-12-07 01:00:00")
