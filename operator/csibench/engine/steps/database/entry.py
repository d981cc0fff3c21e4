"""database (``spec.database``): the entry of the database step, whose parts are this package's other modules (the
pod's script, pgbench's matrix and log, the step that runs it): PostgreSQL and pgbench in one pod on a claim of its own
(the step's companion, made and deleted by the step itself), one row per initialization and per run.
"""

from __future__ import annotations

from csibench.api.models import BenchmarkRunSpec, StepName
from csibench.api.steps import facts_of
from csibench.engine import judges, manifests
from csibench.engine.actions import MEASURE
from csibench.engine.naming import Names
from csibench.engine.observed import CLAIM, POD
from csibench.engine.skips import skip_nothing
from csibench.engine.step import Companion, Manifest, StepContext, StepSpec
from csibench.engine.steps.database import script
from csibench.engine.steps.database import step as database
from csibench.engine.workload import workload_image
from csibench.kube import resources as r


def _database_pod(context: StepContext, index: int) -> Manifest:
    spec, data = context.spec, context.spec.database
    assert data is not None, "the database step runs only with spec.database"
    mounts = [manifests.WorkloadMount("data", script.MOUNT_PATH, context.names.database_volume(index)),
              manifests.WorkloadMount("scratch", script.SCRATCH_PATH)]
    return manifests.build_workload_pod(
        context.names.database_pod(index), "postgres", workload_image(data.image), script.build_command(), mounts,
        context.labels, data.resources, data.nodeSelector or spec.pod.nodeSelector,
        data.tolerations or spec.pod.tolerations, env=script.build_env(data),
        grace_seconds=database.GRACE_SECONDS)


def _database_volume(context: StepContext, index: int) -> Manifest:
    data = context.spec.database
    assert data is not None
    return manifests.build_pvc(context.names.database_volume(index), context.spec, context.labels, size=data.size,
                               filesystem=True)


def _database_pods(spec: BenchmarkRunSpec) -> int:
    return 1 if spec.database is not None else 0


ENTRIES = (
    StepSpec(facts=facts_of(StepName.DATABASE), kind=POD, resource=r.PODS, action=MEASURE,
             object_name=Names.database_pod, count=_database_pods, judge=judges.pod_finished, skip=skip_nothing,
             terminal_warnings=judges.WORKLOAD_FAILED, manifest=_database_pod, report_key="databasePod",
             gone=judges.pod_gone_and_detached, measure=database.measure,
             results=database.RESULTS,
             companion=Companion(CLAIM, r.PVCS, Names.database_volume, _database_volume, "databaseVolume",
                                 judges.claim_and_volume_gone)),
)
