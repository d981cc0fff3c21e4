"""spec.population: objects that exist while a run's steps run, so a batch is measured in a cluster that already
holds thousands of volumes and snapshots (the scale envelope), and what the run made of it (status.population).

The published failures at scale are in the machinery around the storage, not in it: informers that relist tens of
thousands of objects, a snapshot-controller that slows with every content it holds. So the population is API
objects the machinery must carry, made fast and honestly: claims bound to PersistentVolumes made for them
(statically provisioned, the way an administrator imports volumes) and VolumeSnapshots bound to contents made for
them (pre-provisioned), with no provisioner or snapshotter in the way: what paces them is the API server and the
PV controller's binding, the machinery itself, not a provisioner's calls to the storage.

Their handles are ones the storage knows: before the population, the run makes one volume through the class (the
seed claim, Bound by the provisioner) and, with snapshots, one snapshot of it; every population volume names the
seed's volume handle and every population content the seed's snapshot handle. They are Retain, so removing them
never asks the storage to delete anything; the seed is removed last, through its class, like any volume. The
machinery sees what it would see of that many objects (the snapshotter checks each content's snapshot on the
storage once); the storage holds one volume and one snapshot, whatever the level.

The population carries its owner's uid in ``csibench.io/population-of`` and never the run's own label, and its names
start with ``pop-``, not with the run's prefix: the steps' label-selected watches never see it, the shared PV and
content watches pass it over undecoded, no judge or step cleanup counts it, and the run removes it, by that label
only, before the rest of its cleanup.
"""

from __future__ import annotations

from pydantic import Field

from csibench.api.base import Model as _Model

DEFAULT_TIMEOUT_SECONDS = 3600
MAX_POPULATION = 100000  # of each kind: the envelope's largest level (4 objects a pair: 400k objects in etcd)
POPULATION_PREFIX = "pop"  # population objects are "pop-<run prefix>-<index>", the seed "pop-<run prefix>-seed"


class PopulationSpec(_Model):
    """Background objects made before the first step and removed after the last (a level of 0 makes nothing)."""

    claims: int = Field(0, ge=0, le=MAX_POPULATION,
                        description="Claims of the run's class, size and access modes, each bound to a "
                                    "PersistentVolume the run makes for it (statically provisioned, Retain), all "
                                    "naming the seed volume's handle.")
    snapshots: int = Field(0, ge=0, le=MAX_POPULATION,
                           description="VolumeSnapshots, each bound to a pre-provisioned VolumeSnapshotContent "
                                       "(Retain) naming the seed snapshot's handle; needs volumeSnapshotClassName.")
    timeoutSeconds: int = Field(DEFAULT_TIMEOUT_SECONDS, ge=30, le=86400,
                                description="How long making the population (every object created, every claim "
                                            "Bound, every snapshot ready) may take, past which the run fails "
                                            "(PopulationFailed) before its first step; and how long removing it may "
                                            "take, on every path (the run's end, the run deleted, a restart).")
    shared: bool = Field(False, description="The population of the run's BenchmarkSuite, set by a suite with "
                                            "sharePopulation (a run that is not that suite's own is refused): made "
                                            "by its first run, grown to each later run's level (never shrunk), kept "
                                            "after each run and removed by the suite when it ends or is deleted.")

    @property
    def empty(self) -> bool:
        return self.claims + self.snapshots == 0

    def shown(self) -> str:
        """The level as a reader sees it: 1000 (as many claims as snapshots), else claims=10/snapshots=0."""
        return str(self.claims) if self.claims == self.snapshots else f"claims={self.claims}/snapshots={self.snapshots}"


class PopulationStatus(_Model):
    """What the run made of spec.population, and how long it took (never part of a step's clock)."""

    claims: int = Field(0, ge=0, description="Population claims Bound.")
    snapshots: int = Field(0, ge=0, description="Population snapshots ready to use.")
    selector: str | None = Field(None, max_length=128, description="Label selector of the population's objects "
                                                                   "(the seed's too).")
    seconds: float | None = Field(None, description="From the seed's create to the last population object ready.")
    removedSeconds: float | None = Field(None, description="How long removing the population took at cleanup.")
    seedVolume: str | None = Field(None, max_length=253, description="The seed claim's PersistentVolume (made by "
                                                                     "the provisioner: removal waits for it).")
    seedSnapshotContent: str | None = Field(None, max_length=253, description="The seed snapshot's content.")
    message: str | None = Field(None, max_length=1024, description="What went wrong, when something did.")
    sharedBy: str | None = Field(None, max_length=253, description="The BenchmarkSuite the population belongs to "
                                                                   "(population.shared): the run leaves it to the "
                                                                   "suite.")
    foundClaims: int | None = Field(None, ge=0, description="Shared: claims the population held when the run "
                                                            "came (made by the suite's earlier runs).")
    foundSnapshots: int | None = Field(None, ge=0, description="Shared: snapshots it held then.")
