"""What a step of the catalog is made of, as types: the context its rules read, the object of another kind a
measuring step creates, how it submits its objects (``Action``: the strategies are ``actions.py``), and the entry
itself (``StepSpec``). Each step's entry lives in its own module under ``steps/``, which ``catalog.py`` collects;
shared parts (execution, planning, the workload runners) type against these, so none imports a step.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from csibench.api.models import BenchmarkRunSpec
from csibench.api.steps import WFFC, StepFacts
from csibench.engine import judges
from csibench.engine.checks import PlanCheck
from csibench.engine.naming import Names
from csibench.engine.observed import Observed
from csibench.engine.results import ResultTable
from csibench.engine.tracker import StepTracker
from csibench.kube import resources as r

Manifest = dict[str, Any]
Submit = Callable[[str], Awaitable[None]]


class Requests(Protocol):
    """The requests an action may send: the step runner's, where ownership is proven (a create meeting "already
    exists" counts only for the run's own object; a delete or a patch acts only on the very object the run's
    label-selected watch saw, its uid as a precondition). Each stamps the moment its request leaves."""

    def creating(self, resource: r.Resource, body_of: Callable[[str], Manifest], tracker: StepTracker) -> Submit: ...

    def deleting(self, kind: str, resource: r.Resource, tracker: StepTracker,
                 grace_seconds: int | None = None) -> Submit: ...

    def patching(self, kind: str, resource: r.Resource, body_of: Callable[[str], Manifest],
                 tracker: StepTracker) -> Submit: ...


class Action:
    """How a step submits one of its objects (the strategies are ``actions.py``). ``creates``: the step submits
    manifests of its own (the dry run and the report's manifests show its first object); ``deletes``: it removes
    objects an earlier step made (a restore brings them back through ``recreated_by``)."""

    name = "action"
    creates = False
    deletes = False

    def submitter(self, requests: Requests, step: StepSpec, context: StepContext, tracker: StepTracker) -> Submit:
        """A coroutine function of an object's name that sends that object's request."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True)
class StepContext:
    """What a step's rules may read: the run's spec and names, where it works, what it observed so far and the
    trackers of the steps before it."""

    spec: BenchmarkRunSpec
    names: Names
    labels: dict[str, str]
    namespace: str
    binding_mode: str
    observed: Observed
    trackers: Mapping[str, StepTracker]
    nodes: tuple[str, ...] = ()  # schedulable nodes for the publish pods (a move's targets), sorted by name
    # node -> room for the class's driver's volumes there (its CSINode limit less those attached when the run began)
    node_limits: Mapping[str, int | None] = field(default_factory=dict)
    node_zones: Mapping[str, str] = field(default_factory=dict)  # node -> its zone label (of ``nodes`` labelled)
    # The data path's per-job rate limits, (read, write) IOPS by (workload, level slot): learned as the step runs,
    # from each workload's unthrottled row, before that workload's throttled pods are made.
    rates: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)

    @property
    def wffc(self) -> bool:
        return self.binding_mode == WFFC


@dataclass(frozen=True)
class Companion:
    """An object a measuring step creates besides its own (the database's claim): named, dry-run and reported
    like the step's objects, deleted by the step itself, and by a restore before the step runs again."""

    kind: str
    resource: r.Resource
    object_name: Callable[[Names, int], str]
    manifest: Callable[[StepContext, int], dict[str, Any]]
    report_key: str
    gone: Callable[[Observed, frozenset[str]], judges.Judge]
    count: Callable[[BenchmarkRunSpec], int] = lambda spec: 1  # how many (object_name's indexes 0 .. count - 1)
    holds_objects: bool = False  # it mounts the step's own objects (fio pods on claims): a restore deletes it first

    def names(self, spec: BenchmarkRunSpec, names: Names) -> list[str]:
        return [self.object_name(names, index) for index in range(self.count(spec))]


SkipRule = Callable[["StepSpec", StepContext], set[str]]
Measure = Callable[[Any, "StepSpec", StepTracker, StepContext], Awaitable[None]]
JudgeFactory = Callable[[Observed, frozenset[str]], judges.Judge]


Boundaries = Callable[[Observed], Sequence[Callable[[str], bool]]]


@dataclass(frozen=True)
class Phases:
    """A step whose per-object latency has parts the watch events tell apart: ``names`` has one name per part and
    ``boundaries(observed)`` (called when the step starts, so it may note what the objects were then) one predicate
    per boundary between two parts: ``boundary(name)`` is true once that object's part before it is over (first
    seen on a watch event, timed on its arrival). An object done without passing a boundary spent the time up to
    the next one it passed in the part before it."""

    names: tuple[str, ...]  # e.g. ("controller", "node")
    boundaries: Boundaries  # len(names) - 1 predicates per object, in order

    def __post_init__(self) -> None:
        assert 2 <= len(self.names) <= 4, "a step's latency has two to four parts (StepStatus.phases)"


@dataclass(frozen=True)
class NodesNeeded:
    """A step that pins pods to nodes itself needs at least ``count`` nodes that can run the publish pods; ``why``
    says so in the PlanError when the cluster has fewer."""

    count: int
    why: str = "the run places pods on nodes itself"


Check = Callable[[PlanCheck], Awaitable[None]]


@dataclass(frozen=True)
class StepSpec:
    facts: StepFacts  # what the step is, as every layer reads it (api/steps.py): name, order, title, requires, ...
    kind: str  # which of the run's observed kinds its objects are: CLAIM, POD, SNAPSHOT or GROUP_SNAPSHOT
    resource: r.Resource
    action: Action
    object_name: Callable[[Names, int], str]
    count: Callable[[BenchmarkRunSpec], int]
    judge: JudgeFactory
    skip: SkipRule
    terminal_warnings: frozenset[str] = frozenset()
    manifest: Callable[[StepContext, int], Manifest] | None = None  # CREATE steps: object i as submitted
    report_key: str | None = None  # where the report keeps the first object's manifest
    judge_wffc: JudgeFactory | None = None  # judge on a WaitForFirstConsumer class, if it differs
    judge_unheld: JudgeFactory | None = None  # judge when its holders are not in the plan (expansion offline)
    gone: JudgeFactory | None = None  # restore: when one of its objects and what depends on it are gone
    settled: JudgeFactory | None = None  # restore: when one of its objects may be deleted without orphaning anything
    recreated_by: str | None = None  # restore of a deletion step: the step whose manifests bring its objects back
    provisions_on_wffc: bool = False  # on a WaitForFirstConsumer class it provisions volumes: no restore then
    measure: Measure | None = None  # MEASURE steps: runs the step's batches itself (the data path's matrix)
    companion: Companion | None = None  # MEASURE steps: an object of another kind the step creates itself
    results: ResultTable[Any] | None = None  # MEASURE steps: the rows status, report and metrics show
    phases: Phases | None = None  # the parts of its per-object latency, where events tell them apart
    # what the report keeps about each succeeded object (made when the step starts, like the boundaries)
    object_note: Callable[[Observed], Callable[[str], str | None]] | None = None
    holders: str | None = None  # restore: the step whose objects hold this step's (removed first, made again last)
    note: Callable[[StepContext], str | None] | None = None  # how to read its numbers in this run (online, ...)
    check: Check | None = None  # before the run: what only this step needs of the cluster (a PlanError if not)
    places_pods: Callable[[BenchmarkRunSpec], NodesNeeded | None] | None = None  # it pins pods to nodes itself

    @property
    def spec_part(self) -> str | None:
        """The part of the spec that enables it (its facts say it: the plan and admission derive from it)."""
        return self.facts.spec_part

    @property
    def needs_group_snapshots(self) -> bool:
        return self.facts.needs_group_snapshots

    @property
    def name(self) -> str:
        return self.facts.name

    @property
    def requires(self) -> str | None:
        return self.facts.requires

    @property
    def needs_snapshot_class(self) -> bool:
        return self.facts.needs_snapshot_class

    def objects(self, spec: BenchmarkRunSpec, names: Names) -> list[str]:
        return [self.object_name(names, index) for index in range(self.count(spec))]

    def judge_in(self, context: StepContext) -> judges.Judge:
        factory = self.judge_wffc if context.wffc and self.judge_wffc is not None else self.judge
        if self.judge_unheld is not None and self.holders not in context.trackers:
            factory = self.judge_unheld
        return factory(context.observed, self.terminal_warnings)

    def note_in(self, context: StepContext) -> str | None:
        notes = [self.note(context) if self.note is not None else None,
                 self.facts.note_wffc if context.wffc else None]
        return "; ".join(n for n in notes if n) or None
