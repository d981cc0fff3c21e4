"""After an operator restart, the interrupted step's starting state brought back, untimed, before it is measured
again: delete what exists of its objects (and what holds them: the publish pods that mount the claims) until they
and what depends on them are gone, then create again what the steps before it had created, and wait for their
judges. Nothing here is timed or measured; it only makes the next attempt start where the first one did.

Apart from ``execution.py`` because it changes with what a step's starting state is made of (the catalog's
``gone``, ``settled``, ``holders``, ``companion``, ``recreated_by``), not with how a step is timed; it drives its
batches through the same ``StepRunner.batch``.
"""

from __future__ import annotations

import time

from csibench.api.models import ConditionReason
from csibench.api.steps import WFFC
from csibench.engine.catalog import step_named as catalog_step
from csibench.engine.errors import RunAborted
from csibench.engine.execution import StepRunner
from csibench.engine.step import JudgeFactory, StepContext, StepSpec
from csibench.engine.tracker import StepTracker
from csibench.kube import resources as r


async def _remove_companion(runner: StepRunner, step: StepSpec, batches: list[StepTracker], restored: list[str],
                            timeout: float) -> None:
    """What the step created besides its own objects (the database's claim, the modify step's fio pods)."""
    companion, context = step.companion, runner.context
    assert companion is not None
    batches.append(await _remove(runner, f"{step.name}-restore-{companion.kind}", companion.kind,
                                 companion.resource, companion.names(context.spec, context.names), companion.gone,
                                 timeout))
    restored.append(f"deleted {len(batches[-1].objects)} {companion.kind}s")


async def restore(runner: StepRunner, step: StepSpec) -> None:
    """Bring back the state ``step`` started from, untimed: delete what exists of its objects and wait until
    they and what depends on them are gone; for a deletion step (or a step that changed them, which cannot be
    undone in place: an expansion), create again what the step that created them had created, and wait for
    that step's terminal state. What holds the objects (``holders``: the publish pods that mount the claims)
    is deleted before and created again after. Raises RunAborted if that cannot be done."""
    context, tracker = runner.context, runner.context.trackers[step.name]
    step_context = context.step_context(runner.observed)
    timeout = float(context.spec.timeouts.for_step(step.name))
    started = time.monotonic()
    if step.gone is None:
        raise RunAborted(ConditionReason.RESTORE_FAILED, f"step {step.name} declares no way to restore the state "
                         "it started from, so it cannot be measured again after an operator restart")
    if context.binding_mode == WFFC and step.provisions_on_wffc:
        raise RunAborted(ConditionReason.RESTORE_FAILED, f"{step.name} provisions the volumes of a "
                         f"{WFFC} class: its starting state (claims never bound) cannot be restored, so it "
                         "cannot be measured again after an operator restart")
    objects = step.objects(context.spec, context.names)
    seen = runner.observed.uids_of(step.kind)
    present = [name for name in objects if name in seen]
    if step.settled is not None:  # deleted sooner, an object could leave behind what no one would delete
        # One that never settles is deleted at the timeout all the same: cleanup reclaims what it leaves.
        await _wait_for(runner, f"{step.name}-restore-settle", step.kind, present, step.settled, timeout)
    batches: list[StepTracker] = []
    restored: list[str] = []
    holders = catalog_step(step.holders) if step.holders in context.trackers else None
    if holders is not None and holders.gone is not None:  # what holds the step's objects goes first
        batches.append(await _remove(runner, f"{step.name}-restore-{holders.name}", holders.kind, holders.resource,
                                     holders.objects(context.spec, context.names), holders.gone, timeout))
        restored.append(f"deleted {len(batches[-1].objects)} {holders.kind}s of {holders.name}")
    if step.companion is not None and step.companion.holds_objects:  # fio pods on the step's claims: first
        await _remove_companion(runner, step, batches, restored, timeout)
    removal = await _remove(runner, f"{step.name}-restore", step.kind, step.resource, objects, step.gone, timeout)
    batches.append(removal)
    # Also what depends on objects gone before the restart, which its watches never saw (a group's members,
    # deleted after the group): a namesake made while they linger could adopt them.
    all_gone = await _wait_for(runner, f"{step.name}-restore-gone", step.kind, objects, step.gone, timeout)
    restored.append(f"deleted {len(removal.objects)} {step.kind}s")
    if step.companion is not None and not step.companion.holds_objects:  # the database's claim: after its pod
        await _remove_companion(runner, step, batches, restored, timeout)
    if step.recreated_by is not None:
        again = await _make_again(runner, f"{step.name}-recreate", catalog_step(step.recreated_by), step_context,
                                  timeout)
        batches.append(again)
        restored.append(f"created {len(again.objects)} again")
        # What the step saw but its creator had not created (a failed object) is gone now: not the redo's.
        tracker.restore_skipped = set(removal.objects) - set(again.objects)
    if holders is not None:  # ... and comes back last, as its step had made it
        batches.append(await _make_again(runner, f"{step.name}-rehold", holders, step_context, timeout))
        restored.append(f"created {len(batches[-1].objects)} {holders.kind}s of {holders.name} again")
    failed = [(name, o) for batch in [*batches, all_gone] for name, o in batch.outcomes.items() if not o.ok]
    if failed:
        name, outcome = failed[0]
        raise RunAborted(ConditionReason.RESTORE_FAILED, f"could not restore the state {step.name} started "
                         f"from: {len(failed)} objects did not get there ({name}: {outcome.reason} "
                         f"{outcome.message})")
    tracker.restored = (f"attempt {tracker.attempt - 1} was interrupted by an operator restart; restored its "
                        f"starting state ({', '.join(restored)}) in {time.monotonic() - started:.1f}s, "
                        "not part of the step's time")
    tracker.restored_objects = sum(len(batch.objects) for batch in batches)

async def _wait_for(runner: StepRunner, label: str, kind: str, names: list[str], judge: JudgeFactory,
                    timeout: float) -> StepTracker:
    """Untimed, nothing sent: wait until ``judge`` says so of each of ``names`` (the outcomes say which did)."""
    waiting = StepTracker(label, names)

    async def watch_only(name: str) -> None:
        waiting.mark_submitted(name)
    await runner.batch(kind, waiting, judge(runner.observed, frozenset()), watch_only, timeout)
    return waiting

async def _remove(runner: StepRunner, label: str, kind: str, resource: r.Resource, names: list[str],
                  gone: JudgeFactory, timeout: float) -> StepTracker:
    """Untimed: delete those of ``names`` the run's watches saw, and wait until ``gone`` says so of each."""
    seen = runner.observed.uids_of(kind)
    removal = StepTracker(label, [name for name in names if name in seen])
    await runner.batch(kind, removal, gone(runner.observed, frozenset()),
                       runner.requests.deleting(kind, resource, removal), timeout)
    return removal

async def _make_again(runner: StepRunner, label: str, creator: StepSpec, step_context: StepContext,
                      timeout: float) -> StepTracker:
    """Untimed: create again what ``creator`` had created (its objects that succeeded), and wait for its judge."""
    made = runner.context.trackers[creator.name]
    again = StepTracker(label, [name for name, outcome in made.outcomes.items() if outcome.ok])
    await runner.batch(creator.kind, again, creator.judge_in(step_context),
                       creator.action.submitter(runner.requests, creator, step_context, again), timeout)
    return again
