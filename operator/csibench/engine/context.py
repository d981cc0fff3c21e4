"""The run's identity and what it decided before its first object: carried through steps, report and cleanup.

``RunRef`` (``kube/resources.py``, one record with the suite's ``SuiteRef``) names the BenchmarkRun; ``RunContext``
holds the plan (catalog entries), where the run works (``RunScope``: namespace, uid selector, the namespace it may
create), the labels every object gets, the class's binding mode, the cluster facts and the preflight findings, plus
one tracker per planned step of the current iteration (``spec.repeat``), filled in as the steps run, and the records
of the iterations finished so far.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from csibench.api.models import BenchmarkRunSpec, Environment, Finding
from csibench.engine.naming import Names
from csibench.engine.observed import Observed
from csibench.engine.population.sharing import SharedPopulation
from csibench.engine.step import StepContext, StepSpec
from csibench.engine.tracker import StepTracker
from csibench.kube.ownership import RunScope
from csibench.kube.resources import RunRef
from csibench.observe.collector import StepCollector


def scope_of(ref: RunRef, target_namespace: str | None) -> RunScope:
    """What a run may clean up: its labelled objects in the namespace it recorded using, and the one namespace
    its identity lets it create (``csibench-<run>-<uid5>``), which cleanup deletes only while it carries the
    run's uid label. Neither the spec nor a status field can point cleanup at another namespace to delete."""
    names = Names.for_run(ref.name, ref.uid)
    return RunScope(target_namespace or names.namespace, names.prefix, ref.uid, names.namespace)


@dataclass
class RunContext:
    spec: BenchmarkRunSpec
    names: Names
    plan: list[StepSpec]
    scope: RunScope
    own_namespace: bool  # the run creates (and removes) its namespace
    binding_mode: str
    labels: dict[str, str]
    environment: Environment
    trackers: dict[str, StepTracker] = field(default_factory=dict)
    interrupted: list[dict[str, Any]] = field(default_factory=list)  # attempts an operator restart cut short
    findings: list[Finding] = field(default_factory=list)  # preflight, all of them (status keeps the first few)
    iteration: int = 1  # the iteration under way (1-based); ``names`` name its objects
    iterations: list[dict[str, Any]] = field(default_factory=list)  # finished iterations' records (``iterations``)
    nodes: tuple[str, ...] = ()  # schedulable nodes for the publish pods, by name (read when a step places pods)
    node_limits: dict[str, int | None] = field(default_factory=dict)  # node -> room for the class's driver's volumes
    node_zones: dict[str, str] = field(default_factory=dict)  # node -> its zone label (of ``nodes`` labelled)
    seed_node: str | None = None  # spec.population on a WaitForFirstConsumer class: the node its seed is made for
    shared_population: SharedPopulation | None = None  # population.shared: the suite's, proven by preconditions
    collector: StepCollector | None = None  # spec.collect: Prometheus asked after each step (``collection``)

    @property
    def measured_seconds(self) -> float:
        """Step time of the iterations before the current one (status shows the sum over all iterations)."""
        return sum(float(step["status"].get("durationSeconds") or 0.0) for record in self.iterations
                   if record["iteration"] < self.iteration for step in record["steps"])

    def enter_iteration(self, iteration: int) -> None:
        """Work on iteration ``iteration``: its objects get its names (trackers are built by the caller)."""
        self.iteration = iteration
        self.names = self.names.for_iteration(iteration)

    @property
    def target_namespace(self) -> str:
        return self.scope.namespace

    @property
    def needs_snapshots(self) -> bool:
        return any(step.needs_snapshot_class for step in self.plan)

    @property
    def needs_group_snapshots(self) -> bool:
        return any(step.needs_group_snapshots for step in self.plan)

    def step_context(self, observed: Observed) -> StepContext:
        return StepContext(self.spec, self.names, self.labels, self.target_namespace, self.binding_mode, observed,
                           self.trackers, self.nodes, self.node_limits, node_zones=self.node_zones)
