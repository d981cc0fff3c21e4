"""The BenchmarkSuite API (csibench.io/v1alpha1): a matrix of BenchmarkRuns in one resource.

Published tables are matrices (100 vs 1000 volumes, concurrency on vs off, class A vs class B), and a class
comparison is only fair when both classes run under the same load, interleaved. A suite owns its runs as a Job
owns its pods: one BenchmarkRun per cell and round, created in a documented order, never more at once than
``parallelism``. This module is the suite's shape (spec and status) and the pure facts every reader needs: which
cells a matrix has, in which order the runs go, what each child's name and spec are. The CRD is generated from
these models like the run's.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from csibench.api import validation as v
from csibench.api.base import Model as _Model
from csibench.api.models import (
    BASELINE_PATTERN,
    MAX_RUN_NAME,
    MAX_THRESHOLDS,
    ClientSettings,
    Condition,
    DatabaseSpec,
    DataPathSpec,
    Threshold,
    Verdict,
    cel,
)
from csibench.api.population import PopulationSpec

SUITE_KIND = "BenchmarkSuite"
SUITE_PLURAL = "benchmarksuites"
MAX_SUITE_RUNS = 64  # cells x rounds: a suite is a table a person reads, not a load generator
MAX_ROUNDS = 10
MAX_PARALLELISM = 8
MAX_AXIS_VALUES = 8
MAX_SHAPE_VALUES = 4  # data-path and database shapes: each one a long step
# A child is "<suite>-c<cell>-r<round>": at most "-c63-r10" after the suite's name, within a run's name limit.
MAX_SUITE_NAME = MAX_RUN_NAME - len(f"-c{MAX_SUITE_RUNS - 1}-r{MAX_ROUNDS}")
SUITE_UID_LABEL = "csibench.io/suite-uid"
SUITE_NAME_LABEL = "csibench.io/suite"
CELL_LABEL = "csibench.io/cell"
ROUND_LABEL = "csibench.io/round"
# The axes in the order cells are numbered (the first varies slowest), as the spec and status name them.
AXES = ("storageClassName", "volumes", "pvcsPerPod", "size", "client", "dataPath", "database", "population")


class SuiteOrder(StrEnum):
    """How the rounds and cells follow each other (``kubectl explain benchmarksuite.spec.order``)."""

    INTERLEAVED = "Interleaved"  # round 1: every cell, round 2: every cell, ... (A B A B: the same load for all)
    SEQUENTIAL = "Sequential"  # cell 1: every round, cell 2: every round, ... (A A B B)


class SuitePhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"  # every run Succeeded
    FAILED = "Failed"  # the suite could not start (InvalidSpec, a name taken), or a run Failed (the rest still ran)


ClassName = Annotated[str, Field(min_length=1, max_length=v.DNS_SUBDOMAIN_MAX, pattern=v.DNS_SUBDOMAIN_PATTERN)]
Size = Annotated[str, Field(max_length=64, pattern=v.SIZE_PATTERN)]


class SuiteMatrix(_Model):
    """The axes of the suite: each one a list of values; the cells are every combination of them. An axis
    overrides the template's field of the same name in every cell."""

    storageClassName: list[ClassName] | None = Field(
        None, min_length=1, max_length=MAX_AXIS_VALUES,
        description="StorageClasses to compare (each must exist before its runs start).")
    volumes: list[Annotated[int, Field(ge=1, le=100000)]] | None = Field(
        None, min_length=1, max_length=MAX_AXIS_VALUES, description="Batch sizes: the scaling curve's x axis.")
    pvcsPerPod: list[Annotated[int, Field(ge=1, le=128)]] | None = Field(
        None, min_length=1, max_length=MAX_AXIS_VALUES, description="PVCs per publish pod.")
    size: list[Size] | None = Field(None, min_length=1, max_length=MAX_AXIS_VALUES,
                                    description="Volume sizes (quantities, e.g. 1Gi).")
    client: list[ClientSettings] | None = Field(None, min_length=1, max_length=MAX_AXIS_VALUES,
                                                description="API client rate limits of the runs.")
    dataPath: list[DataPathSpec] | None = Field(None, min_length=1, max_length=MAX_SHAPE_VALUES,
                                                description="Data-path shapes (spec.dataPath of a run).")
    database: list[DatabaseSpec] | None = Field(None, min_length=1, max_length=MAX_SHAPE_VALUES,
                                                description="Database shapes (spec.database of a run).")
    population: list[PopulationSpec] | None = Field(
        None, min_length=1, max_length=MAX_AXIS_VALUES,
        description="Population levels (spec.population of a run: claims and snapshots beside the batch), e.g. "
                    "[{claims: 0}, {claims: 1000, snapshots: 1000}]: the scale envelope's x axis. Each run makes "
                    "its level and removes it; order Sequential runs a level's rounds one after another.")

    @field_validator("*")
    @classmethod
    def _values_unique(cls, value: list[Any] | None, info: ValidationInfo) -> list[Any] | None:
        seen = [item.model_dump(mode="json") if isinstance(item, _Model) else item for item in value or []]
        if any(seen[i] in seen[:i] for i in range(len(seen))):
            raise ValueError(f"{info.field_name} lists a value twice: each value is a cell of its own")
        return value

    @field_validator("population")
    @classmethod
    def _levels_differ(cls, value: list[PopulationSpec] | None) -> list[PopulationSpec] | None:
        levels = [(level.claims, level.snapshots) for level in value or []]
        if len(set(levels)) < len(levels):
            raise ValueError("population lists a level twice (the same claims and snapshots): each level is a cell "
                             "of its own")
        return value

    @field_validator("size")
    @classmethod
    def _sizes_in_bounds(cls, value: list[str] | None) -> list[str] | None:
        for size in value or []:
            if not 0 < v.parse_quantity(size) <= v.parse_quantity(v.SIZE_MAX):
                raise ValueError(f"size must be greater than 0 and at most {v.SIZE_MAX}, not {size}")
        return value

    def axes(self) -> list[tuple[str, list[Any]]]:
        """The axes set, in AXES order, each with its values as a run spec takes them."""
        found = []
        for axis in AXES:
            values = getattr(self, axis)
            if values:
                found.append((axis, [value.model_dump(mode="json", exclude_unset=True)
                                     if isinstance(value, _Model) else value for value in values]))
        return found


def _axis_size(axis: str) -> str:
    return f"(has(self.matrix) && has(self.matrix.{axis}) ? size(self.matrix.{axis}) : 1)"


RUNS_RULE = (" * ".join([*(_axis_size(axis) for axis in AXES), "self.repeat"]) + f" <= {MAX_SUITE_RUNS}",
             f"a suite runs at most {MAX_SUITE_RUNS} BenchmarkRuns (cells x repeat): split it")
POPULATION_RULE = ("!has(self.matrix) || !has(self.matrix.population) || self.parallelism == 1",
                   "a population axis needs parallelism 1: a run beside another run's population measures both levels")
SHARED_POPULATION_RULE = ("!has(self.sharePopulation) || !self.sharePopulation || self.parallelism == 1",
                          "sharePopulation needs parallelism 1: two runs would grow one population at once")
CLASS_RULE = ("(has(self.matrix) && has(self.matrix.storageClassName)) || has(self.template.storageClassName)",
              "set the storage class in the template or as a matrix axis (storageClassName)")


class BenchmarkSuiteSpec(_Model):
    """A matrix of BenchmarkRuns: a run template, axes over it, and how the runs follow each other."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, json_schema_extra=cel(RUNS_RULE, CLASS_RULE,
                                                                                         POPULATION_RULE,
                                                                                         SHARED_POPULATION_RULE))

    template: dict[str, Any] = Field(
        ..., description="A BenchmarkRun spec shared by every cell; each matrix axis overrides its field. Every "
                         "cell's spec is validated as a run's (admission of a server-side dry run) before the "
                         "first run starts.")
    matrix: SuiteMatrix = Field(default_factory=SuiteMatrix, description="The axes; no axis: one cell.")
    order: SuiteOrder = Field(SuiteOrder.INTERLEAVED, description="Interleaved (round by round over every cell: "
                                                                  "the fair comparison) or Sequential.")
    repeat: int = Field(1, ge=1, le=MAX_ROUNDS, description="Rounds over the whole matrix; the rounds of a cell are "
                                                            "its samples in comparisons.")
    parallelism: int = Field(1, ge=1, le=MAX_PARALLELISM,
                             description="Runs at once (default 1: runs never overlap, so none measures the load "
                                         "of another).")
    thresholds: list[Threshold] | None = Field(
        None, max_length=MAX_THRESHOLDS, description="Bounds given to every run (replacing the template's).")
    baseline: str | None = Field(None, max_length=v.DNS_LABEL_MAX + 1 + MAX_RUN_NAME, pattern=BASELINE_PATTERN,
                                 description="A finished run every run is compared with (replacing the template's).")
    regressionThresholdPercent: float | None = Field(None, ge=1, le=1000,
                                                     description="With baseline: given to every run.")
    sharePopulation: bool = Field(False, description="One population for the whole suite instead of one per run: "
                                                     "the first run makes it, each later run grows it to its own "
                                                     "level, and the suite removes it when it ends or is deleted. "
                                                     "Levels must never fall in the order the runs go (Sequential, "
                                                     "or one round), and no axis may change the claims it holds "
                                                     "(storageClassName, size).")

    @model_validator(mode="after")
    def _population_alone(self) -> BenchmarkSuiteSpec:
        """The CEL rule POPULATION_RULE, for a suite stored before it existed."""
        if self.matrix.population and self.parallelism != 1:
            raise ValueError(POPULATION_RULE[1])
        if self.sharePopulation:
            shared_population_problem = _shared_population_problem(self)
            if shared_population_problem:
                raise ValueError(shared_population_problem)
        elif any(level.shared for level in self.matrix.population or []) or (
                isinstance(template_level := self.template.get("population"), dict) and template_level.get("shared")):
            raise ValueError("population.shared is the suite's to set: use sharePopulation: true")
        return self


def _shared_population_problem(spec: BenchmarkSuiteSpec) -> str | None:
    """Why a suite cannot share one population among its runs, or None: it shares one when every run has a level,
    the runs go one at a time, no axis changes what a population claim is, and no run's level is below the one
    before it (a shared population only grows)."""
    if spec.parallelism != 1:
        return SHARED_POPULATION_RULE[1]
    changing = [axis for axis in ("storageClassName", "size") if getattr(spec.matrix, axis)]
    if changing:
        return (f"sharePopulation: the axis {changing[0]} changes what a population claim is; one population "
                "cannot serve every cell")
    levels: list[PopulationSpec] = []
    for slot in schedule(spec):
        raw = child_spec(spec, slot.cell).get("population")
        if raw is None:
            return f"sharePopulation: cell {slot.cell.id} has no population (set one in the template or as an axis)"
        try:
            levels.append(PopulationSpec.model_validate(raw))
        except ValueError:
            return None  # the cell's own check says what is wrong with it
    for before, after in itertools.pairwise(levels):
        if after.claims < before.claims or after.snapshots < before.snapshots:
            return (f"sharePopulation: a shared population only grows, and the runs' levels go from "
                    f"{before.shown()} to {after.shown()} (list the levels ascending; with repeat, use order "
                    "Sequential; the population axis varies fastest, so beside another axis of several values "
                    "its levels would fall)")
    return None


def shared_population_seconds(spec: BenchmarkSuiteSpec) -> float:
    """How long removing a suite's shared population may take: the longest timeoutSeconds among its runs' levels
    (the largest level is the last made)."""
    seconds = [PopulationSpec.model_validate(raw).timeoutSeconds for slot in schedule(spec)
               if (raw := child_spec(spec, slot.cell).get("population")) is not None]
    return float(max(seconds, default=PopulationSpec().timeoutSeconds))


@dataclass(frozen=True)
class Cell:
    """One combination of axis values: ``c<index>`` in AXES order, the first axis varying slowest."""

    index: int
    values: tuple[tuple[str, Any], ...]  # (axis, value as a run spec takes it)
    positions: tuple[int, ...]  # each value's place in its axis (dataPath[1])

    @property
    def id(self) -> str:
        return f"c{self.index}"

    def shown(self) -> dict[str, str]:
        """Axis -> how a reader sees the value (a label-like string: 100, fast, qps=5/burst=10, dataPath[1])."""
        return {axis: show_value(axis, value, position) for (axis, value), position in
                zip(self.values, self.positions, strict=True)}


def show_value(axis: str, value: Any, position: int) -> str:
    if axis == "client":
        return "/".join(f"{key}={value[key]}" for key in ("qps", "burst", "maxInFlight") if key in value) or "default"
    if axis in ("dataPath", "database"):
        return f"{axis}[{position}]"
    if axis == "population":
        return PopulationSpec.model_validate(value).shown()
    return str(value)


def cells_of(matrix: SuiteMatrix) -> list[Cell]:
    axes = matrix.axes()
    combos = itertools.product(*(list(enumerate(values)) for _, values in axes))
    return [Cell(index, tuple((axis, value) for (axis, _), (_, value) in zip(axes, combo, strict=True)),
                 tuple(position for position, _ in combo)) for index, combo in enumerate(combos)]


@dataclass(frozen=True)
class Slot:
    """One child run: a cell in a round (1-based)."""

    cell: Cell
    round: int

    def child_name(self, suite: str) -> str:
        return f"{suite}-{self.cell.id}-r{self.round}"


def schedule(spec: BenchmarkSuiteSpec) -> list[Slot]:
    """The runs in the order they start: Interleaved goes round by round, Sequential cell by cell."""
    cells, rounds = cells_of(spec.matrix), range(1, spec.repeat + 1)
    if spec.order == SuiteOrder.SEQUENTIAL:
        return [Slot(cell, r) for cell in cells for r in rounds]
    return [Slot(cell, r) for r in rounds for cell in cells]


def child_spec(spec: BenchmarkSuiteSpec, cell: Cell) -> dict[str, Any]:
    """The run spec of one cell: the template, each axis's value over its field, the suite's verdict settings."""
    merged = {**spec.template, **dict(cell.values)}
    if spec.thresholds is not None:
        merged["thresholds"] = [t.model_dump(exclude_none=True) for t in spec.thresholds]
    if spec.baseline is not None:
        merged["baseline"] = spec.baseline
    if spec.regressionThresholdPercent is not None:
        merged["regressionThresholdPercent"] = spec.regressionThresholdPercent
    if spec.sharePopulation and isinstance(merged.get("population"), dict):
        merged["population"] = {**merged["population"], "shared": True}
    return merged


class SuiteCellStatus(_Model):
    """One cell: its id and the axis values that make it."""

    id: str = Field(..., description="c0, c1, ... in the order of the matrix's axes (the first varies slowest).")
    values: dict[str, str] = Field(default_factory=dict, description="Axis -> value, as reports show it.")


class SuiteRunStatus(_Model):
    """One child run of the suite."""

    name: str = Field(..., description="The BenchmarkRun: <suite>-<cell>-r<round>.")
    cell: str = Field(..., description="Its cell (status.cells).")
    round: int = Field(..., description="Its round (1-based).")
    uid: str | None = Field(None, description="The run's uid once created (a run is never created twice).")
    phase: str | None = Field(None, description="The run's phase (empty: not started).")
    verdict: str | None = Field(None, description="The run's verdict, if it judges any.")
    message: str | None = Field(None, description="Why it ended as it did, when the run itself cannot say (it was "
                                                  "deleted before it ended).")


class SuitePopulationStatus(_Model):
    """A shared population's removal, by the suite that owns it."""

    selector: str | None = Field(None, max_length=128, description="Label selector of its objects.")
    removed: bool = Field(False, description="Whether nothing of it is left.")
    removedSeconds: float | None = Field(None, description="How long removing it took.")
    message: str | None = Field(None, max_length=1024, description="What removing it found or left.")
    seedVolume: str | None = Field(None, max_length=253, description="The seed claim's PersistentVolume, recorded "
                                                                     "before the removal deletes the claim that "
                                                                     "names it: a retried removal still waits for it.")
    seedSnapshotContent: str | None = Field(None, max_length=253, description="The seed snapshot's content, "
                                                                              "likewise.")


class BenchmarkSuiteStatus(_Model):
    """Where the suite is: its cells, and each run's phase."""

    phase: SuitePhase | None = Field(None, description="Pending, Running, Succeeded or Failed.")
    conditions: list[Condition] = Field(default_factory=list, description="The Ready condition.")
    observedGeneration: int | None = Field(None, description="Generation of the spec this status is about.")
    message: str | None = Field(None, description="What the suite is doing or why it ended as it did.")
    progress: str | None = Field(None, description="Runs finished / runs in all, e.g. 3/8.")
    total: int | None = Field(None, description="Runs in all (cells x repeat).")
    done: int | None = Field(None, description="Runs finished (Succeeded or Failed).")
    current: str | None = Field(None, description="The run(s) under way, comma-separated.")
    startTime: str | None = Field(None, description="When the first run was created.")
    completionTime: str | None = Field(None, description="When the last run ended.")
    verdict: Verdict | None = Field(None, description="Over the runs that judge one: Fail if any failed, Unknown if "
                                                      "any is unknown, else Pass.")
    cells: list[SuiteCellStatus] = Field(default_factory=list, max_length=MAX_SUITE_RUNS,
                                         description="The cells of the matrix.")
    runs: list[SuiteRunStatus] = Field(default_factory=list, max_length=MAX_SUITE_RUNS,
                                       description="Every run in the order they start.")
    population: SuitePopulationStatus | None = Field(None, description="The shared population (sharePopulation) "
                                                                       "and its removal.")
