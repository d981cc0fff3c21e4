"""The modifyVolume step's measure: fio on every volume (before), every claim patched at once to the new
VolumeAttributesClass and timed until the class is in effect, fio again (after).

Only the change is on the step's clock: its per-object latency runs from the PATCH to the watch event whose
status says ``currentVolumeAttributesClassName`` is the new class with no modification pending, and its throughput
is the batch's. The fio rounds are outside it (one pod per volume, all at once, the same command both times), so
the step's numbers are the resizer's and the driver's, and the rows say what the volumes delivered in each class.
A claim whose modification the driver refused ends ``Infeasible`` with the resizer's last Warning; the "after"
row then measures what the volumes have. fio rounds that fail say why in their row; the change is measured
all the same. An operator restart redoes the whole step (its pods deleted first, as any measuring step's).
"""

from __future__ import annotations

from collections.abc import Sequence

from csibench.api.models import ModifyRow, ModifyWhen, StepState
from csibench.api.text import shorten
from csibench.engine import judges
from csibench.engine.judges import Judge, Verdict
from csibench.engine.observed import CLAIM, POD, ClaimState, Observed
from csibench.engine.results import ResultTable, keep_rows
from csibench.engine.step import StepContext, StepSpec
from csibench.engine.steps.modify import fio
from csibench.engine.tracker import StepTracker
from csibench.engine.workload import Batches, finished_log
from csibench.metrics import METRICS

POD_SLACK_SECONDS = 120  # a fio round's pods: start, the file laid out, the log read
MODIFY_TO = "csibench.io/modify-to"  # on a claim: the class the run's PATCH asked for
INFEASIBLE = "Infeasible"  # modifyVolumeStatus.status when the driver refused the class's parameters


def target_of(context: StepContext) -> str:
    assert context.spec.modify is not None
    return context.spec.modify.volumeAttributesClassName


def modified(observed: Observed, terminal: frozenset[str]) -> Judge:
    """Done when the claim's status says the class its PATCH asked for (``MODIFY_TO``) is in effect and no
    modification is pending; failed when the modification is Infeasible, in the driver's words (the resizer writes
    the status, then its Warning, whose event wakes this judge again: until it comes the claim waits, and the
    step's timeout quotes the state), or when a terminal Warning came."""
    def in_effect(claim: ClaimState) -> bool:
        target = claim.annotations.get(MODIFY_TO)
        return target is not None and claim.attributes_class == target and claim.modify_status is None

    settled = judges.ready_with(observed, terminal, CLAIM, observed.claims.get, in_effect, lambda claim: None)

    def judge(name: str, submitted: float) -> Verdict | None:
        claim, warning = observed.claims.get(name), observed.warnings.get((CLAIM, name))
        if claim is not None and claim.exists and claim.modify_status == INFEASIBLE and warning is not None \
                and warning.at >= submitted:
            return Verdict(False, INFEASIBLE, shorten(warning.message, 600))
        return settled(name, submitted)
    return judge


async def measure(runner: Batches, step: StepSpec, tracker: StepTracker, context: StepContext) -> None:
    """fio before, the change on the step's clock, fio after (the caller wrote status and started nothing)."""
    data = context.spec.modify
    assert data is not None
    volumes = [index for index, claim in enumerate(tracker.objects) if claim not in tracker.skipped]
    claims = [tracker.objects[index] for index in volumes]
    rows = [ModifyRow(when=ModifyWhen.BEFORE, attributesClass=classes_of(context.observed, claims),
                      volumes=len(claims)),
            ModifyRow(when=ModifyWhen.AFTER, volumes=len(claims))]
    if data.fioSeconds == 0 or not claims:  # nothing to measure: no rows rather than rows of nothing
        rows = []
    keep_rows(tracker, rows)
    timeout = float(context.spec.timeouts.for_step(step.name))
    try:
        if rows:
            rows[0].state = StepState.RUNNING
            keep_rows(tracker, rows)
            rows[0] = await _fio_round(runner, step, context, volumes, rows[0], 0, timeout)
            keep_rows(tracker, rows)
        with RESULTS.measuring(tracker, rows):
            await runner.show(f"moving {len(claims)} volumes to {data.volumeAttributesClassName}")
            await runner.batch(CLAIM, tracker, step.judge_in(context), runner.creator(step, context, tracker),
                               timeout)
        if rows:
            # The clock stopped with the change; the step is not done until the round after it is: until then
            # its status says Running, so a restart in that round redoes the step rather than find it finished.
            clock, tracker.stopped = tracker.stopped, None
            rows[1].attributesClass = classes_of(context.observed, claims)
            rows[1].state = StepState.RUNNING
            keep_rows(tracker, rows)
            rows[1] = await _fio_round(runner, step, context, volumes, rows[1], context.spec.volumes, timeout)
            keep_rows(tracker, rows)
            tracker.stopped = clock
    except BaseException:
        RESULTS.interrupt_step(tracker, rows)
        raise


async def _fio_round(runner: Batches, step: StepSpec, context: StepContext, volumes: list[int], row: ModifyRow,
                     first: int, timeout: float) -> ModifyRow:
    """One fio pod per volume at once (the companion pods ``first + i`` for volume i), their results summed, the
    pods deleted until gone and detached."""
    data = context.spec.modify
    assert data is not None
    await runner.show(f"fio on {len(volumes)} volumes, {row.when.value} the change")
    names = [context.names.modify_pod(first + volume) for volume in volumes]
    pods = StepTracker(f"{step.name}-fio-{row.when.value}", names)
    await runner.batch(POD, pods, judges.pod_finished(context.observed, judges.WORKLOAD_FAILED),
                       runner.companion_creator(step, context, pods), timeout + data.fioSeconds + POD_SLACK_SECONDS)
    delivered, failures = [], []
    for name in names:
        outcome = pods.outcomes[name]
        log, unavailable = await finished_log(runner, name)
        try:
            delivered.append(fio.parse_log(log))
        except fio.FioFailed as error:
            words = str(error)  # fio's own, unless it printed nothing: then Kubernetes' (the pod never ran, ...)
            if words == fio.NO_RESULT and not outcome.ok:
                words = f"{outcome.reason}: {outcome.message or 'the pod failed'}"
            elif words == fio.NO_RESULT and unavailable is not None:
                words = unavailable[1]
            failures.append(f"{name}: {words}")
    seen = context.observed.uids_of(POD)
    removal = StepTracker(f"{step.name}-fio-{row.when.value}-delete", [name for name in names if name in seen])
    await runner.batch(POD, removal, judges.pod_gone_and_detached(context.observed, frozenset()),
                       runner.companion_remover(step, removal), timeout)
    return build_row(row, delivered, failures)


def build_row(row: ModifyRow, delivered: Sequence[fio.Delivered], failures: Sequence[str]) -> ModifyRow:
    """The volumes' sums (pure); failed, with the first pod's words, when any volume has no result."""
    done = row.model_copy()
    if failures or not delivered:
        done.state = StepState.FAILED
        done.message = shorten(f"{len(failures)} of {row.volumes} fio pods failed; " + "; ".join(failures[:3]), 600)
        return done
    done.state = StepState.SUCCEEDED
    done.readIOPS = round(sum(d.read_iops for d in delivered), 1)
    done.writeIOPS = round(sum(d.write_iops for d in delivered), 1)
    done.readMiBps = round(sum(d.read_bps for d in delivered) / fio.MIB, 2)
    done.writeMiBps = round(sum(d.write_bps for d in delivered) / fio.MIB, 2)
    done.perVolumeIOPS = round(min(d.read_iops + d.write_iops for d in delivered), 1)
    return done


def classes_of(observed: Observed, claims: Sequence[str]) -> str | None:
    """The classes the claims have in effect (their status), as the row names them: one, or several joined; None
    when none has one."""
    found = sorted({state.attributes_class for claim in claims
                    if (state := observed.claims.get(claim)) is not None and state.attributes_class})
    return ", ".join(found) if found else None


def record_metrics(run_label: str, rows: Sequence[ModifyRow]) -> None:
    for row in rows:
        if row.state == StepState.SUCCEEDED:
            METRICS.record_modify(run_label, row.when.value, (row.readIOPS or 0) + (row.writeIOPS or 0),
                                  ((row.readMiBps or 0) + (row.writeMiBps or 0)) * fio.MIB)


RESULTS = ResultTable("modify", ModifyRow, ("readIOPS", "writeIOPS", "readMiBps", "writeMiBps", "perVolumeIOPS"),
                      record_metrics)
