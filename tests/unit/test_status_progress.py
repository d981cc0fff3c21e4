"""Progress writes during a step are skipped when only the clock moved: a data-path row measures for minutes with
nothing to report, and a status write every two seconds (API server, etcd, the operator's own watch) ran beside the
fio it measured. Counts, rows and conditions still go out at once, and a full write still sends the clock."""

from __future__ import annotations

import asyncio

from csibench.api.models import StepState, StepStatus
from csibench.engine.status import StatusRecorder, without_clock
from tests.support.fake_kube import FakeKube
from tests.support.fake_runs import REF


def test_only_the_clock_fields_are_left_out() -> None:
    status = {"phase": "Running", "progress": "3/10", "duration": "4s", "totalStepSeconds": 4.2,
              "client": {"requests": 12}, "steps": [{"name": "dataPath", "durationSeconds": 4.2, "succeeded": 3}]}
    assert without_clock(status) == {"phase": "Running", "progress": "3/10",
                                     "steps": [{"name": "dataPath", "succeeded": 3}]}


def test_a_progress_write_goes_out_only_when_more_than_the_clock_moved() -> None:
    fake = FakeKube()
    fake.put("benchmarkruns", REF.namespace, {"metadata": {"name": REF.name, "uid": REF.uid}, "spec": {}})
    recorder = StatusRecorder(REF, fake)
    step = StepStatus(name="dataPath", state=StepState.RUNNING, objects=10, succeeded=3, failed=0, durationSeconds=4.2)

    async def go() -> list[int]:
        fake.loop = asyncio.get_running_loop()
        recorder.status.steps, recorder.status.progress, recorder.status.totalStepSeconds = [step], "3/10", 4.2
        await recorder.write()
        sent = [len(fake.status_patches)]
        recorder.status.steps = [step.model_copy(update={"durationSeconds": 6.2})]
        recorder.status.totalStepSeconds, recorder.status.duration = 6.2, "6s"
        await recorder.write(progress=True)  # the clock alone (and the request counter, which counts writes)
        sent.append(len(fake.status_patches))
        recorder.status.steps = [step.model_copy(update={"durationSeconds": 8.2, "succeeded": 4})]
        recorder.status.progress = "4/10"
        await recorder.write(progress=True)  # an object finished: sent, clock and all
        sent.append(len(fake.status_patches))
        recorder.status.totalStepSeconds = 10.2
        await recorder.write()  # not a progress write: the clock is sent
        sent.append(len(fake.status_patches))
        return sent

    assert asyncio.run(go()) == [1, 1, 2, 3]
    stored = fake.objects[("benchmarkruns", REF.namespace, REF.name)]["status"]
    assert stored["progress"] == "4/10" and stored["totalStepSeconds"] == 10.2
    assert stored["steps"][0]["durationSeconds"] == 8.2
