"""spec.churn and what it measures: steady churn for a duration, cut in windows (status.churn), and its drift.

Storage breaks over time: leaks that build up, sidecars whose memory grows, attach slowing while mass creates run.
A churn is waves of volumes, each wave through create → publish → unpublish → delete (claims until Bound, one pod
per claim until Ready, the pods until gone and detached, the claims until they and their volumes are gone). A wave
starts every ``everySeconds`` (the target rate: ``waveSize / everySeconds`` volumes per second) while fewer than
``maxWavesInFlight`` waves are going; so one wave's create and attach meet the previous wave's detach and delete
(the overlap), and a system that cannot keep up shows as waves started late, not as a changed load.

Time is cut in windows of ``windowSeconds`` from the step's start. Each window's row (``ChurnWindow``) holds, per
phase, the completions that ended in it (watch events, the operator's clock), their throughput and latency
percentiles; what is left behind by the waves finished by its end (``ChurnLeaks``: the array's volumes nothing
names, exact on an array that answers audits; VolumeAttachments and Released PVs still there); and the CSI
components' peak memory in it (spec.collect). Completions after ``durationSeconds`` (the waves still going when it
ended) are one last ``tail`` window, never compared.

The drift verdict (``ChurnDrift``) holds the last ``drift.windows`` windows against the first ones after the
warm-up, per phase (its median latency per window, as a speed: the window is the sample, its waves overlap and are
not independent), by the judgement a baseline gets (``api/regression.py``: Welch's t on the logarithms, significant
and beyond ``thresholdPercent``, Holm-adjusted over the phases): Drift when a phase got slower beyond the threshold,
shown (a true slowdown of at most the threshold is called Drift at most 5% of the time, for windows as independent
as separate runs); NoDrift only when every phase was shown not slower beyond the threshold (one-sided, at 5%:
faster by any amount, or slower by an amount shown within it; a true slowdown of at least the threshold is called
NoDrift at most 5% of the time); Inconclusive otherwise (a phase too noisy to tell, or with no completions in the
last windows). The throughput is not judged: at a target rate it is the rate as long as the storage keeps up, and
waves started late say when it does not. Leaks and memory growth are bounded by thresholds (step churn: ``leaked``,
``memoryGrowthPercent``).
"""

from __future__ import annotations

import math
from enum import StrEnum

from pydantic import ConfigDict, Field

from csibench.api.base import Model as _Model
from csibench.api.run.common import StepState, cel
from csibench.api.run.observations import Latency

PHASES = ("create", "publish", "unpublish", "delete")
MAX_CHURN_WINDOWS = 120  # windows within durationSeconds (a longer soak takes longer windows); status stays small
MAX_CHURN_OBJECTS = 50000  # volumes over all waves (and as many pods)
MAX_MEMORY_COMPONENTS = 4
MAX_COMPONENT_NAME = 63
MAX_DRIFT_MEASURES = len(PHASES)
DEFAULT_DRIFT_WINDOWS = 5
MAX_DRIFT_WINDOWS = 20

DEFAULT_WARMUP_WINDOWS = 1
_DRIFT_WINDOWS = f"(has(self.drift) && has(self.drift.windows) ? self.drift.windows : {DEFAULT_DRIFT_WINDOWS})"
_WARMUP = f"(has(self.drift) && has(self.drift.warmupWindows) ? self.drift.warmupWindows : {DEFAULT_WARMUP_WINDOWS})"
_CHURN_RULES = (
    (f"(self.durationSeconds + self.windowSeconds - 1) / self.windowSeconds <= {MAX_CHURN_WINDOWS}",
     f"churn: at most {MAX_CHURN_WINDOWS} windows (durationSeconds / windowSeconds, rounded up); take longer "
     "windows"),
    ("self.everySeconds <= self.windowSeconds",
     "churn: everySeconds must be at most windowSeconds (every window starts a wave, or it has nothing to judge)"),
    (f"self.durationSeconds / self.windowSeconds >= {_WARMUP} + 2 * {_DRIFT_WINDOWS}",
     "churn: durationSeconds / windowSeconds must be at least drift.warmupWindows + 2 x drift.windows (the first "
     "windows after the warm-up are held against the last, never against themselves)"),
    (f"(self.durationSeconds + self.everySeconds - 1) / self.everySeconds * self.waveSize <= {MAX_CHURN_OBJECTS}",
     f"churn: at most {MAX_CHURN_OBJECTS} volumes over all waves (waveSize x durationSeconds / everySeconds)"),
)


class ChurnDriftSpec(_Model):
    """How the churn's drift is judged: its last windows against its first."""

    windows: int = Field(DEFAULT_DRIFT_WINDOWS, ge=2, le=MAX_DRIFT_WINDOWS,
                         description="Windows at each end compared: the first this many (after the warm-up) against "
                                     "the last this many (the tail after durationSeconds is never compared).")
    warmupWindows: int = Field(DEFAULT_WARMUP_WINDOWS, ge=0, le=20,
                               description="Windows at the start left out (the churn filling up: the first waves "
                                           "meet no deletes yet); the first compared window is the one after them.")
    thresholdPercent: float = Field(25.0, ge=1, le=1000,
                                    description="A measure drifted when it got worse by more than this percent, "
                                                "shown significant (the baseline's judgement).")


class ChurnSpec(_Model):
    """The churn step: for durationSeconds, a wave of waveSize volumes every everySeconds through create → publish
    → unpublish → delete, at most maxWavesInFlight waves at once; one row per window."""

    model_config = ConfigDict(json_schema_extra=cel(*_CHURN_RULES))

    durationSeconds: int = Field(..., ge=20, le=86400,
                                 description="How long waves are started; the waves still going then are finished "
                                             "(their completions are the tail window).")
    waveSize: int = Field(5, ge=1, le=500, description="Volumes per wave, each mounted by a pod of its own.")
    everySeconds: int = Field(10, ge=1, le=3600,
                              description="A wave starts every this many seconds: the target rate is waveSize / "
                                          "everySeconds volumes per second.")
    maxWavesInFlight: int = Field(3, ge=1, le=100,
                                  description="At most this many waves at once (the overlap: with 2 or more, a "
                                              "wave's create and attach meet the last one's detach and delete; 1: "
                                              "none). A wave due while the cap holds starts late, and is counted.")
    windowSeconds: int = Field(60, ge=5, le=3600, description="Length of a window (a row of status.churn).")
    drift: ChurnDriftSpec = Field(default_factory=ChurnDriftSpec,
                                  description="The drift verdict: the last windows against the first.")

    @property
    def waves(self) -> int:
        return math.ceil(self.durationSeconds / self.everySeconds)

    @property
    def volumes(self) -> int:
        return self.waves * self.waveSize

    @property
    def windows(self) -> int:
        """Windows within durationSeconds (a last partial one counts)."""
        return math.ceil(self.durationSeconds / self.windowSeconds)

    def problem(self) -> str | None:
        """The CRD's rules, for a spec stored before they existed (None: none broken)."""
        if self.windows > MAX_CHURN_WINDOWS:
            return _CHURN_RULES[0][1]
        if self.everySeconds > self.windowSeconds:
            return _CHURN_RULES[1][1]
        if self.durationSeconds // self.windowSeconds < self.drift.warmupWindows + 2 * self.drift.windows:
            return _CHURN_RULES[2][1]
        if self.volumes > MAX_CHURN_OBJECTS:
            return _CHURN_RULES[3][1]
        return None


class ChurnPhaseWindow(_Model):
    """One phase's completions in one window."""

    phase: str = Field(..., description="create, publish, unpublish or delete.")
    completed: int = Field(0, description="Objects whose phase ended well in the window.")
    failed: int = Field(0, description="Objects whose phase failed in the window.")
    throughput: float | None = Field(None, description="Completed per second of the window.")
    latency: Latency | None = Field(None, description="Per object, submitted to done (watch events), seconds.")


class ChurnLeaks(_Model):
    """What the waves finished by a window's end left behind, counted then (totals since the step started)."""

    source: str = Field(..., description="Array: the array's own list of volumes (exact); Cluster: what "
                                         "Kubernetes still holds only (the array never answered).")
    volumes: int = Field(0, description="Volumes the array held of finished waves that no PV names: every one seen "
                                        "so far (a leaked volume stays leaked).")
    stale: bool = Field(False, description="The array did not answer at this window's end: its count is the last "
                                           "one it gave.")
    attachments: int = Field(0, description="VolumeAttachments of finished waves' volumes still there.")
    released: int = Field(0, description="PVs of finished waves still there (Released, not removed).")
    message: str | None = Field(None, description="Why the count is the cluster's only (the array's words).")

    @property
    def total(self) -> int:
        return self.volumes + self.attachments + self.released


class ComponentMemory(_Model):
    """A CSI component's peak memory in a window (spec.collect's memory query)."""

    component: str = Field(..., max_length=MAX_COMPONENT_NAME, description="The container (or the series' "
                                                                           "labels, cut).")
    bytes: float = Field(..., description="Its highest reading in the window, bytes.")


class ChurnWindow(_Model):
    """One window of the churn (status.churn)."""

    index: int = Field(..., description="0 first.")
    startSeconds: float = Field(..., description="Its start, seconds after the step's.")
    endSeconds: float = Field(..., description="Its end, seconds after the step's.")
    tail: bool = Field(False, description="After durationSeconds: the last waves finishing (never compared).")
    state: StepState = Field(StepState.SUCCEEDED, description="Succeeded, or Failed when an object's phase failed "
                                                             "in it.")
    wavesStarted: int = Field(0, description="Waves started in it.")
    wavesLate: int = Field(0, description="Of those, waves that started more than a second after their time "
                                          "(maxWavesInFlight held them, or the operator was busy).")
    lateSeconds: float | None = Field(None, description="The latest start in it: seconds after its time.")
    phases: list[ChurnPhaseWindow] = Field(default_factory=list, max_length=len(PHASES),
                                           description="Per phase, its completions in the window.")
    leaked: int | None = Field(None, description="Leaks first counted at its end: leaks.total's growth over the "
                                                 "window before's (never below 0).")
    leaks: ChurnLeaks | None = Field(None, description="What finished waves left behind, counted at its end.")
    memory: list[ComponentMemory] = Field(default_factory=list, max_length=MAX_MEMORY_COMPONENTS,
                                          description="The CSI components' peak memory in it (spec.collect; the "
                                                      "largest 4).")
    message: str | None = Field(None, description="The first failure in it, or why it was not measured.")


class DriftChange(StrEnum):
    NO_DRIFT = "NoDrift"
    DRIFT = "Drift"
    INCONCLUSIVE = "Inconclusive"


class DriftMeasure(_Model):
    """One measure's last windows against its first."""

    measure: str = Field(..., description="The phase judged: 'publish latencyP50'.")
    first: float | None = Field(None, description="The median of the first windows' p50s, seconds.")
    last: float | None = Field(None, description="The median of the last windows' p50s, seconds.")
    ratio: float | None = Field(None, description="How much faster the last windows were (geometric means; below "
                                                  "1: slower).")
    low: float | None = Field(None, description="The ratio's 90% interval, low end.")
    high: float | None = Field(None, description="The ratio's 90% interval, high end.")
    p: float | None = Field(None, description="The one-sided p that decided, or would have: of a slowdown beyond the "
                                              "threshold (Holm-adjusted over the phases) for Drift, or for an "
                                              "undecided phase observed slower than that; otherwise of 'not slower "
                                              "beyond it' (below 0.05 shows NoDrift).")
    change: str = Field(..., description="Drift (shown slower beyond the threshold), NoDrift (shown not slower "
                                         "beyond it) or Inconclusive.")
    message: str = Field("", description="The judgement in words.")


class ChurnDrift(_Model):
    """The churn's drift verdict (status.churnDrift), judged when the run ends."""

    change: DriftChange = Field(..., description="NoDrift, Drift or Inconclusive.")
    message: str = Field("", description="Which measures drifted, or why it could not be told.")
    windows: int = Field(..., description="Windows compared at each end.")
    thresholdPercent: float = Field(..., description="The drift threshold, percent.")
    measures: list[DriftMeasure] = Field(default_factory=list, max_length=MAX_DRIFT_MEASURES,
                                         description="Each measure judged.")
    leaked: int | None = Field(None, description="Leaks over the whole churn (the largest window total).")
    memoryGrowthPercent: float | None = Field(None, description="The largest growth of a component's peak memory, "
                                                                "last windows against first, percent.")
    memoryComponent: str | None = Field(None, description="The component that grew the most.")
