"""The churn step: its windows and leak counts (pure), its drift verdict, its admission rules, its thresholds,
and whole churns against the in-memory API server (overlapping waves as batches side by side, rows per window,
nothing left; an operator restart in the middle measures it again from scratch)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import pytest
from prometheus_client import REGISTRY, generate_latest
from pydantic import ValidationError

from csibench.api.churn import ChurnLeaks, ChurnPhaseWindow, ChurnSpec, ChurnWindow, ComponentMemory, DriftChange
from csibench.api.collect import CollectedValue, StepCollection
from csibench.api.models import BenchmarkRunSpec, BenchmarkRunStatus, ConditionReason, Latency, Phase, StepState
from csibench.engine.drift import churn_drift, judge_drift
from csibench.engine.drift_power import windows_needed
from csibench.engine.judgement import Judgement
from csibench.engine.steps.churn.windows import (
    Completion,
    build_window,
    count_leaks,
    memory_of,
    window_bounds,
    window_of,
)
from csibench.engine.thresholds import judge
from csibench.engine.verdict import RunVerdict
from tests.support.fake_kube import Behaviour, FakeKube
from tests.support.fake_runs import NAMES, kill_when, owned_left, resume, run, running, spec, steps_of
from tests.support.metrics import samples

CHURN = {"durationSeconds": 110, "windowSeconds": 10, "everySeconds": 5, "waveSize": 2}


def test_a_completion_belongs_to_the_window_its_end_falls_in_and_after_the_duration_to_the_tail() -> None:
    assert [window_of(at, 10, 7, 65) for at in (0.0, 9.999, 10.0, 59.9, 60.0, 64.9, 65.0, 300.0)] == [
        0, 0, 1, 5, 6, 6, 7, 7]
    assert window_bounds(6, 10, 7, 65, 80) == (60, 65)  # the last window ends with the duration
    assert window_bounds(7, 10, 7, 65, 80) == (65, 80)  # the tail: to the last wave's end
    assert window_bounds(7, 10, 7, 65, 50) == (65, 65)


def test_a_window_row_counts_each_phase_and_names_its_first_failure() -> None:
    ended = [Completion("create", 1.0, 0.5, True), Completion("create", 2.0, 1.5, True),
             Completion("publish", 3.0, 2.0, False, "Timeout", "no terminal state within 60s"),
             Completion("delete", 4.0, 0.25, True)]
    row = build_window(0, (0.0, 10.0), False, ended, lateness=[0.0, 0.4, 2.5])
    phases = {p.phase: p for p in row.phases}
    assert [p.phase for p in row.phases] == ["create", "publish", "unpublish", "delete"]
    assert (phases["create"].completed, phases["create"].failed, phases["create"].throughput) == (2, 0, 0.2)
    assert phases["create"].latency is not None and phases["create"].latency.max == 1.5
    assert (phases["publish"].completed, phases["publish"].failed, phases["publish"].latency) == (0, 1, None)
    assert phases["unpublish"].completed == 0 and phases["unpublish"].throughput == 0.0
    assert row.state == StepState.FAILED and row.message == "publish: Timeout: no terminal state within 60s"
    assert (row.wavesStarted, row.wavesLate, row.lateSeconds, row.tail) == (3, 1, 2.5, False)


def test_leaks_are_what_finished_waves_left_the_array_and_the_cluster_holding() -> None:
    finished = {"c0": "pvc-0", "c1": "pvc-1", "c2": "pvc-2", "c3": None}
    # pvc-0 is gone from Kubernetes but the array holds it: leaked. pvc-1 still has its PV (Released): counted as
    # that, not twice. pvc-9 is a volume of a wave still going: not counted. pvc-2 still attached somewhere.
    leaked: set[str] = set()
    leaks = count_leaks(finished, {"pvc-1", "pvc-9"}, ["pvc-2", "pvc-9"], (["pvc-0", "pvc-1", "pvc-9"], 3), leaked,
                        True)
    assert (leaks.source, leaks.volumes, leaks.released, leaks.attachments, leaks.total) == ("Array", 1, 1, 1, 3)
    assert leaks.message is None and leaked == {"pvc-0"}
    # A later answer cut at the array's bound (pvc-0 not named) never takes a leak back
    short = count_leaks(finished, set(), [], (["pvc-2"], 5), leaked, True)
    assert short.volumes == 2 and leaked == {"pvc-0", "pvc-2"}
    assert short.message == ("the array named 1 of the 5 volumes it holds: a leaked volume it did not name is "
                             "counted once it does")
    # The array did not answer this time: its last count stands, said stale
    stale = count_leaks(finished, {"pvc-1"}, [], "the array did not answer within 5s", leaked, True)
    assert (stale.source, stale.volumes, stale.released, stale.stale) == ("Array", 2, 1, True)
    # ... and an array that never answered leaves the cluster's counts only
    blind = count_leaks(finished, {"pvc-1"}, [], "the class's driver does not answer audits", set(), False)
    assert (blind.source, blind.volumes, blind.released, blind.stale) == ("Cluster", 0, 1, False)
    assert blind.message == "the class's driver does not answer audits"


def test_memory_per_window_sums_replicas_and_keeps_the_largest() -> None:
    def value(container: str, pod: str, bytes_: float, query: str = "peakMemoryBytes") -> CollectedValue:
        return CollectedValue(query=query, labels={"container": container, "pod": pod}, value=bytes_)
    collection = StepCollection(start="a", end="b", values=[
        value("csi-provisioner", "p-0", 30e6), value("csi-attacher", "a-0", 20e6), value("sim-driver", "n-0", 10e6),
        value("sim-driver", "n-1", 15e6), value("csi-provisioner", "p-0", 4.0, query="cpuSeconds")])
    assert [(m.component, m.bytes) for m in memory_of(collection, "peakMemoryBytes")] == [
        ("csi-provisioner", 30e6), ("sim-driver", 25e6), ("csi-attacher", 20e6)]
    assert memory_of(None, "peakMemoryBytes") == []


def _rows(p50s: Sequence[float], memory: Sequence[float] | None = None, leaks: int = 0,
          seed: int = 1, spread: float = 0.0) -> list[ChurnWindow]:
    """Windows with each phase's p50 as given, and a tail: a little noise between the phases (within 5%), or with
    ``spread``, each phase's own log-normal noise (the sd of its logarithm)."""
    noise = random.Random(seed)
    rows = []
    for index, p50 in enumerate(p50s):
        phases = [ChurnPhaseWindow(phase=phase, completed=4, throughput=0.4, latency=Latency(
            p50=p50 * (math.exp(noise.gauss(0, spread)) if spread else 1 + noise.uniform(-0.05, 0.05)),
            p90=p50 * 2, p99=p50 * 3, max=p50 * 3, mean=p50)) for phase in ("create", "publish", "unpublish", "delete")]
        rows.append(ChurnWindow(index=index, startSeconds=index * 10.0, endSeconds=index * 10.0 + 10, phases=phases,
                                state=StepState.SUCCEEDED, leaks=ChurnLeaks(source="Array", volumes=leaks),
                                memory=[ComponentMemory(component="csi-provisioner", bytes=memory[index])]
                                if memory else []))
    rows.append(ChurnWindow(index=len(p50s), startSeconds=70, endSeconds=75, tail=True,
                            phases=[ChurnPhaseWindow(phase="create", completed=1, latency=Latency(
                                p50=99.0, p90=99.0, p99=99.0, max=99.0, mean=99.0))]))
    return rows


def churn_spec(**drift: Any) -> ChurnSpec:
    return ChurnSpec.model_validate({**CHURN, "drift": drift})


STEADY = [0.2, 1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 0.99, 1.01, 1.0]  # a fast warm-up, then 10 steady windows


def test_a_steady_churn_has_no_drift_and_the_warm_up_and_tail_are_never_compared() -> None:
    # The warm-up window is 5x faster and the tail 50x slower: neither is held against anything.
    drift = judge_drift(churn_spec(), _rows(STEADY))
    assert drift.change == DriftChange.NO_DRIFT and drift.windows == 5, drift
    assert [m.measure for m in drift.measures] == ["create latencyP50", "publish latencyP50",
                                                   "unpublish latencyP50", "delete latencyP50"]
    assert all(m.first is not None and 0.9 < m.first < 1.1 for m in drift.measures)
    assert all(m.change == "NoDrift" and "not slower beyond 25%, shown" in m.message for m in drift.measures), \
        drift.measures
    assert drift.message.startswith("windows 1-5 against 6-10: every phase shown not slower beyond 25%")


SLOWER = [1.0, 1.0, 1.05, 0.95, 1.0, 1.02, 2.0, 2.1, 1.9, 2.0, 1.95]  # the last 5 windows twice as slow


def test_latency_that_grows_beyond_the_threshold_is_drift() -> None:
    drift = judge_drift(churn_spec(), _rows(SLOWER))
    assert drift.change == DriftChange.DRIFT
    assert {m.change for m in drift.measures} == {"Drift"}
    assert all(m.ratio is not None and 0.45 < m.ratio < 0.55 for m in drift.measures)  # half as fast
    assert "create latencyP50: 0.49x [0.47, 0.52], n=5/5: slower beyond 25%, shown" in drift.message
    # ... but not beyond a threshold of 150%
    assert judge_drift(churn_spec(thresholdPercent=150), _rows(SLOWER)).change == DriftChange.NO_DRIFT


def test_a_drift_of_at_most_the_threshold_is_called_drift_rarely() -> None:
    """The error the verdict controls, by simulation: each phase's window p50s log-normal around 1 s on its own
    (sd 0.15, independent, so the four phases are four chances and Holm's correction matters), the last windows
    slower by exactly the threshold (25%): Drift in at most alpha (5%) of 600 churns, with slack for 600 draws.
    Without Holm, 18% were (111 of these 600)."""
    drifted = sum(judge_drift(churn_spec(), _rows([1.0] * 6 + [1.25] * 5, seed=trial, spread=0.15)).change ==
                  DriftChange.DRIFT for trial in range(600))
    assert drifted <= 0.05 * 600 + 2 * math.sqrt(600 * 0.05 * 0.95), drifted


def test_a_drift_of_at_least_the_threshold_is_called_no_drift_rarely() -> None:
    """The other error, by simulation: 10 windows a side (enough to decide a steady churn at this spread), every
    phase's last windows slower by exactly the threshold: NoDrift in at most 5% of 400 churns (with slack); and the
    same churn without the slowdown is shown steady most of the time, so the test is not passed by never
    deciding."""
    noise = random.Random(11)
    passed = steady = 0
    spec_10 = ChurnSpec.model_validate({**CHURN, "durationSeconds": 210, "drift": {"windows": 10}})
    for trial in range(400):
        first = [math.exp(noise.gauss(0, 0.1)) for _ in range(11)]
        last = [math.exp(noise.gauss(0, 0.1)) for _ in range(10)]
        passed += judge_drift(spec_10, _rows(first + [1.25 * x for x in last], seed=trial)).change == \
            DriftChange.NO_DRIFT
        steady += judge_drift(spec_10, _rows(first + last, seed=trial)).change == DriftChange.NO_DRIFT
    assert passed <= 0.05 * 400 + 3 * math.sqrt(400 * 0.05 * 0.95), passed
    assert steady >= 0.8 * 400, steady


def test_a_slowdown_not_shown_within_the_threshold_is_inconclusive() -> None:
    """Significantly slower, by about the threshold: shown neither beyond 25% nor not beyond it: Inconclusive,
    with how many windows a side would decide."""
    rows = _rows([1.0, 1.0, 1.02, 0.98, 1.01, 0.99, 1.23, 1.27, 1.25, 1.26, 1.24])
    drift = judge_drift(churn_spec(), rows)
    untold = [m for m in drift.measures if m.change == "Inconclusive"]
    assert untold and {m.change for m in drift.measures} <= {"Inconclusive", "NoDrift"}, drift.measures
    assert drift.change == DriftChange.INCONCLUSIVE, drift
    said = untold[0].message
    assert "significantly slower, by an amount shown neither beyond 25% nor within it" in said, said
    assert "windows a side" in said and untold[0].p is not None and untold[0].p >= 0.05, untold[0]


def test_the_windows_a_side_it_asks_for_would_decide() -> None:
    """'About N windows a side would decide (80% power)' is the power of the test that would decide (here
    non-inferiority: the phase is not slower), so churns of N windows a side at that spread and difference decide
    the phase about 80% of the time (300 simulated, with slack), and N is not asked beyond what 5 a side lack."""
    logs = [0.25 * k / math.sqrt(2.5) for k in (-2, -1, 0, 1, 2)]  # mean 0, sd 0.25: 5 windows a side, unchanged
    n = windows_needed(logs, logs, 0.25, 4, 20)
    assert n is not None and 6 <= n <= 20, n
    spec_n = ChurnSpec.model_validate({**CHURN, "durationSeconds": 10 * (2 * n + 1), "drift": {"windows": n}})
    decided = sum(judge_drift(spec_n, _rows([1.0] * (2 * n + 1), seed=trial, spread=0.25)).measures[0].change ==
                  "NoDrift" for trial in range(300))
    assert 0.72 * 300 <= decided <= 0.95 * 300, (n, decided)
    half = max(2, n // 2)  # and half as many decide it clearly less often
    spec_half = ChurnSpec.model_validate({**CHURN, "durationSeconds": 10 * (2 * half + 1), "drift": {"windows": half}})
    fewer = sum(judge_drift(spec_half, _rows([1.0] * (2 * half + 1), seed=trial, spread=0.25)).measures[0].change ==
                "NoDrift" for trial in range(300))
    assert fewer < 0.72 * 300 and fewer < decided, (half, fewer, n, decided)


def test_getting_faster_is_no_drift() -> None:
    """Drift is about getting worse: a phase faster in the last windows by an amount not pinned down (its interval
    reaches past 25% faster) is still shown not slower, and so NoDrift."""
    faster = _rows([1.0, 1.0, 1.05, 0.95, 1.0, 1.02, 0.7, 0.85, 0.8, 0.95, 0.75])
    drift = judge_drift(churn_spec(), faster)
    assert drift.change == DriftChange.NO_DRIFT, drift
    assert all(m.ratio is not None and m.ratio > 1.1 and m.low is not None and m.low > 0.8 for m in drift.measures)


def test_memory_growth_and_leaks_are_read_off_the_windows() -> None:
    drift = judge_drift(churn_spec(), _rows(STEADY, memory=[50] + [100] * 5 + [150] * 5, leaks=3))
    assert drift.memoryGrowthPercent == 50.0 and drift.memoryComponent == "csi-provisioner"
    assert drift.leaked == 3


def test_what_is_not_shown_either_way_is_inconclusive_never_a_pass() -> None:
    noisy = judge_drift(churn_spec(), _rows([1.0, 1.0, 1.4, 0.7, 1.0, 1.3, 1.5, 6.0, 2.0, 0.8, 3.0]))
    assert noisy.change == DriftChange.INCONCLUSIVE, noisy  # 2.6x slower, but too noisy for 5 windows a side
    assert noisy.message.startswith("windows 1-5 against 6-10: not shown either way")
    stalled = _rows(STEADY)
    for row in stalled[6:11]:  # publish's completions stop in the last windows (they end up in the tail)
        row.phases = [p for p in row.phases if p.phase != "publish"]
    drift = judge_drift(churn_spec(), stalled)
    publish = next(m for m in drift.measures if m.measure == "publish latencyP50")
    assert drift.change == DriftChange.INCONCLUSIVE and publish.last is None, drift
    assert "no completions in windows 6, 7, 8, 9, 10 of those compared" in publish.message, publish.message
    partly = _rows(STEADY)
    for row in partly[9:11]:  # a stall in the last two windows only: never averaged away by the other three
        row.phases = [p for p in row.phases if p.phase != "delete"]
    delete = judge_drift(churn_spec(), partly).measures[3]
    assert delete.change == "Inconclusive" and "no completions in windows 9, 10 of those" in delete.message, delete
    as_the_operator_writes = _rows(STEADY)  # a window's row keeps every phase; one with no completion has no latency
    as_the_operator_writes[7].phases[1] = ChurnPhaseWindow(phase="publish", completed=0, failed=2)
    publish = judge_drift(churn_spec(), as_the_operator_writes).measures[1]
    assert publish.change == "Inconclusive" and "no completions in window 7 of those" in publish.message, publish
    everywhere = _rows(STEADY)  # three phases stalled through every compared window: not a pass on the fourth
    for row in everywhere[1:11]:
        row.phases = row.phases[:1]
    drift = judge_drift(churn_spec(), everywhere)
    assert drift.change == DriftChange.INCONCLUSIVE and [m.change for m in drift.measures] == [
        "NoDrift", "Inconclusive", "Inconclusive", "Inconclusive"], drift
    assert "no completions in the windows compared: stalled" in drift.measures[1].message
    empty = _rows(STEADY)
    for row in empty:
        row.phases = []
    assert judge_drift(churn_spec(), empty).change == DriftChange.INCONCLUSIVE
    failed = RunVerdict(Phase.FAILED, ConditionReason.OBJECTS_FAILED, "churn: 2 failed")
    said = churn_drift(churn_spec(), _rows(SLOWER), failed)
    assert said is not None and said.change == DriftChange.INCONCLUSIVE
    assert said.message.startswith("the run failed to measure (ObjectsFailed), so its drift proves nothing")
    assert churn_drift(None, empty, failed) is None and churn_drift(churn_spec(), [], failed) is None


def test_drift_is_a_part_of_the_verdict_with_its_condition() -> None:
    drifted = judge_drift(churn_spec(), _rows(SLOWER))
    judged = Judgement(None, None, drifted)
    assert judged.verdict.value == "Fail" and judged.broken == 1
    assert judged.drift_condition() == ("False", "Drift", drifted.message)
    steady = Judgement(None, None, judge_drift(churn_spec(), _rows(STEADY)))
    assert steady.verdict.value == "Pass" and steady.drift_condition()[:2] == ("True", "NoDrift")  # type: ignore
    assert [event[0] for event in judged.events()] == ["ChurnDrift"]


def test_the_churn_s_thresholds_read_its_leaks_and_memory_growth() -> None:
    run_spec = BenchmarkRunSpec.model_validate({
        "storageClassName": "sim", "steps": ["churn"], "churn": CHURN,
        "collect": {}, "thresholds": [{"step": "churn", "metric": "leaked", "max": 0},
                                      {"step": "churn", "metric": "memoryGrowthPercent", "max": 20}]})
    status = BenchmarkRunStatus(churnDrift=judge_drift(churn_spec(), _rows(
        STEADY, memory=[50] + [100] * 5 + [150] * 5, leaks=2)))
    verdict = judge(run_spec, status, RunVerdict(Phase.SUCCEEDED, ConditionReason.SUCCEEDED, ""))
    assert verdict is not None and [r.message for r in verdict.results] == [
        "churn leaked 2 > 0 (max)", "churn memoryGrowthPercent 50 > 20 (max)"]
    with pytest.raises(ValidationError, match="a step threshold's metric is one of"):
        BenchmarkRunSpec.model_validate({"storageClassName": "sim", "thresholds": [
            {"step": "createVolume", "metric": "memoryGrowthPercent", "max": 20}]})
    with pytest.raises(ValidationError, match=r"a memoryGrowthPercent threshold needs spec\.collect"):
        BenchmarkRunSpec.model_validate({"storageClassName": "sim", "steps": ["churn"], "churn": CHURN,
                                         "thresholds": [{"step": "churn", "metric": "memoryGrowthPercent",
                                                         "max": 20}]})


@pytest.mark.parametrize(("churn", "words"), [
    ({"durationSeconds": 100, "windowSeconds": 10}, r"at least drift\.warmupWindows \+ 2 x drift\.windows"),
    ({"durationSeconds": 1201, "windowSeconds": 10}, "at most 120 windows"),  # 121 windows, the last of 1 s
    ({"durationSeconds": 600, "windowSeconds": 10, "everySeconds": 11}, "everySeconds must be at most windowSeconds"),
    ({"durationSeconds": 86400, "windowSeconds": 3600, "everySeconds": 1, "waveSize": 500}, "at most 50000 volumes"),
])
def test_a_churn_that_cannot_be_judged_or_kept_is_refused(churn: dict[str, Any], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        BenchmarkRunSpec.model_validate({"storageClassName": "sim", "steps": ["churn"], "churn": churn})
    with pytest.raises(ValidationError, match="churn cannot be combined with repeat > 1"):
        BenchmarkRunSpec.model_validate({"storageClassName": "sim", "steps": ["churn"], "churn": CHURN, "repeat": 2})


def short_churn(**fields: Any) -> BenchmarkRunSpec:
    """A churn of 3 s in windows of 1 s (below what admission takes, so a unit test stays short): a wave of 2
    every second, at most 2 at once."""
    run_spec = spec(steps=["churn"], churn=CHURN, **fields)
    run_spec.churn = ChurnSpec.model_construct(durationSeconds=3, waveSize=2, everySeconds=1, maxWavesInFlight=2,
                                               windowSeconds=1, drift=churn_spec().drift)
    return run_spec


def test_a_churn_runs_its_waves_side_by_side_and_keeps_a_row_per_window() -> None:
    fake = FakeKube(Behaviour(ready_delay=0.05, release_delay=0.05))
    status = run(fake, short_churn())
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    assert steps_of(status)["churn"] == ("Succeeded", 6, 6, 0, 0)
    assert [row.index for row in status.churn][:3] == [0, 1, 2]
    assert sum(row.wavesStarted for row in status.churn) == 3
    for phase in ("create", "publish", "unpublish", "delete"):
        assert sum(p.completed for row in status.churn for p in row.phases if p.phase == phase) == 6, phase
    assert all(row.leaks is not None and row.leaks.total == 0 and row.leaks.source == "Cluster"
               for row in status.churn)
    claims = [path for path, body in fake.created if path.endswith("/persistentvolumeclaims")]
    pods = [body["metadata"]["name"] for path, body in fake.created if path.endswith("/pods")]
    assert len(claims) == 6 and pods == [NAMES.churn_pod(i) for i in range(6)]
    assert status.churnDrift is not None and status.verdict is not None
    text = generate_latest(REGISTRY).decode()
    assert len(samples(text, "csibench_churn_window_completions_per_second", run="runs/bench")) == 4
    assert samples(text, "csibench_churn_leaked_objects", run="runs/bench", kind="volumes")[0][1] == 0
    assert owned_left(fake) == []


def test_a_churn_cut_by_a_restart_is_measured_again_from_scratch() -> None:
    fake = FakeKube(Behaviour(ready_delay=0.05, release_delay=0.05))
    run_spec = short_churn()
    previous = kill_when(fake, run_spec, running("churn"), extra_sleep=1.2)
    status = resume(fake, run_spec, previous)
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    churn = next(s for s in status.steps if s.name == "churn")
    assert churn.attempts == 2 and churn.succeeded == 6, churn
    assert sum(row.wavesStarted for row in status.churn) == 3  # the rows are the second attempt's only
    assert owned_left(fake) == []


def test_waves_that_cannot_start_within_the_duration_fail_as_not_started() -> None:
    """One wave at a time, each taking longer than the interval: the second starts late, the third's time comes
    but the slot frees only after the duration, so its volumes fail NotStarted instead of running past it."""
    fake = FakeKube(Behaviour(bind_delay=0.8, ready_delay=0.3, release_delay=0.3))
    run_spec = short_churn()
    assert run_spec.churn is not None
    run_spec.churn = ChurnSpec.model_construct(**{**run_spec.churn.__dict__, "maxWavesInFlight": 1})
    status = run(fake, run_spec)
    churn = next(s for s in status.steps if s.name == "churn")
    reasons = {reason.reason: reason.count for reason in churn.failureReasons}
    assert reasons.get("NotStarted", 0) >= 2 and churn.succeeded + churn.failed == 6, churn
    assert max(row.lateSeconds or 0 for row in status.churn) > 0.2  # the second wave waited for the first
    assert owned_left(fake) == []
