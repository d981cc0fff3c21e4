"""A population a BenchmarkSuite shares among its runs (``sharePopulation``; each child's ``population.shared``).

A scale envelope measured one level after another rebuilt the population for every cell: 10,000 claims made,
measured beside, removed, then 10,000 made again for the next level. A shared population belongs to the suite: its
objects carry the suite's uid in ``csibench.io/population-of``, live in the suite's namespace and are named after
the suite (``pop-<suite>-<uid5>-<index>``), so every run of the suite finds the same ones; each run makes only
what its level adds, leaves the population when it ends (its own cleanup selects its own uid, which the population
never carries), and the suite removes it when the suite ends or is deleted.

Ownership is proven, not taken from the spec: a run uses a suite's population only when the run carries the
suite's uid label and a controller owner reference to that uid, and the suite named there exists with that uid and
shares its population. A run alone that asks for ``shared`` fails before it creates anything.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from csibench.api.models import ConditionReason
from csibench.api.suite import SUITE_KIND, SUITE_UID_LABEL
from csibench.api.text import shorten
from csibench.engine.errors import PlanError
from csibench.engine.population.making import Owner
from csibench.engine.population.removal import Removal, SeedParts, remove_population, seed_parts
from csibench.kube import resources as r
from csibench.kube.api import KubeApi
from csibench.kube.ownership import controlled_by
from csibench.kube.resources import InvalidName, RunRef, SuiteRef


@dataclass(frozen=True)
class SharedPopulation:
    """The suite whose population a run grows, and the owner its objects name."""

    owner: Owner
    suite: str


def suite_owner(namespace: str, suite_name: str, suite_uid: str, extra_labels: dict[str, str]) -> Owner:
    """The owner every run of the suite (and the suite's removal) names: the suite's namespace, name and uid."""
    return Owner(namespace, f"{suite_name}-{suite_uid[:5]}", suite_uid, dict(extra_labels))


def _refused(why: str) -> PlanError:
    return PlanError(ConditionReason.INVALID_SPEC, f"population.shared: {why}; a shared population is a "
                      "BenchmarkSuite's (sharePopulation), used only by that suite's own runs")


def _controller_suite(run: dict[str, Any]) -> tuple[str, str] | None:
    """(name, uid) of the suite the run says controls it, when its label and its controller reference agree."""
    meta = run.get("metadata") or {}
    uid = str((meta.get("labels") or {}).get(SUITE_UID_LABEL) or "")
    if not uid or not controlled_by(run, SUITE_UID_LABEL, SUITE_KIND, uid):
        return None
    names = [str(ref.get("name")) for ref in meta.get("ownerReferences") or [] if ref.get("uid") == uid]
    return (names[0], uid) if names else None


async def shared_population(client: KubeApi, ref: RunRef, extra_labels: dict[str, str]) -> SharedPopulation:
    """The population a run shares with its suite; PlanError (InvalidSpec, before the run creates anything) unless
    the run is proven the suite's and the suite shares its population."""
    run = await client.get(r.BENCHMARK_RUNS.path(ref.namespace, ref.name))
    if run is None or (run.get("metadata") or {}).get("uid") != ref.uid:
        raise _refused("the run's own object could not be read")
    found = _controller_suite(run)
    if found is None:
        raise _refused(f"run {ref.label} is not a BenchmarkSuite's (no controller reference to a suite matching its "
                       f"{SUITE_UID_LABEL} label)")
    suite_name, suite_uid = found
    try:
        suite_path = r.BENCHMARK_SUITES.path(ref.namespace, suite_name)
    except InvalidName as error:  # an owner reference's name is not checked as a name by the API server
        raise _refused(f"run {ref.label}'s owner reference names no valid suite: {shorten(str(error), 300)}") \
            from None  # the name is anyone's, of any length: only a bounded part reaches status
    suite = await client.get(suite_path)
    if suite is None or (suite.get("metadata") or {}).get("uid") != suite_uid:
        raise _refused(f"the suite {ref.namespace}/{suite_name} that owns run {ref.label} is gone")
    if (suite.get("metadata") or {}).get("deletionTimestamp"):  # its population is being removed: none grows it
        raise _refused(f"the suite {ref.namespace}/{suite_name} that owns run {ref.label} is being deleted")
    if not (suite.get("spec") or {}).get("sharePopulation"):
        raise _refused(f"the suite {ref.namespace}/{suite_name} does not share its population")
    return SharedPopulation(suite_owner(ref.namespace, suite_name, suite_uid, extra_labels), suite_name)


async def remove_suite_population(client: KubeApi, ref: SuiteRef, known: SeedParts, deadline_seconds: float,
                                  remember: Callable[[SeedParts], Awaitable[None]]) -> Removal:
    """Remove the suite's shared population: everything carrying its uid as the population's owner, and the seed's
    PV and content. Those two are found from the seed claim and snapshot (or ``known``, as the suite's status
    recorded them) and handed to ``remember`` before anything is deleted: once the seed claim is gone nothing else
    names its PV, and a retried removal must still wait for it."""
    owner = suite_owner(ref.namespace, ref.name, ref.uid, {})
    parts = await seed_parts(client, owner, known)
    if parts.volume != known.volume or parts.content != known.content:
        await remember(parts)
    return await remove_population(client, owner, deadline_seconds, parts)
