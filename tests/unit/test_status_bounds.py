"""A run's status write never carries unbounded text and never fails for its size: every string is bounded, the
whole is bounded, and a write the API server refuses as too large is sent again shortened, with the cut said in
the StatusShortened condition and a Warning Event (the fake API refuses sizes as the API server and etcd do)."""

from __future__ import annotations

import asyncio

import pytest

import csibench.engine.status as status_module
from csibench.api.models import Finding, Severity
from csibench.api.text import bound_document
from csibench.engine.status import SHORTENED, StatusRecorder
from tests.support.fake_kube import FakeKube
from tests.support.fake_runs import REF


def test_every_string_and_key_is_bounded_and_each_cut_is_named() -> None:
    document = {"message": "m" * 5000, "steps": [{"name": "ok", "labels": {"k" * 50: "v" * 10}}], "n": 3}
    bounded, cut = bound_document(document, 20)
    assert isinstance(bounded, dict) and bounded["n"] == 3 and len(bounded["message"]) <= 20
    assert bounded["steps"][0]["name"] == "ok"
    assert all(len(key) <= 20 for key in bounded["steps"][0]["labels"])
    assert cut == ["status.message (5,000 characters)", "status.steps[0].labels key (50 characters)"]


def written(fake: FakeKube) -> dict[str, object]:
    stored = fake.objects[("benchmarkruns", REF.namespace, REF.name)]["status"]
    assert isinstance(stored, dict)
    return stored


def recorder() -> tuple[FakeKube, StatusRecorder]:
    fake = FakeKube()
    fake.put("benchmarkruns", REF.namespace, {"metadata": {"name": REF.name, "uid": REF.uid}, "spec": {}})
    return fake, StatusRecorder(REF, fake)


def write(fake: FakeKube, status: StatusRecorder, *messages: str) -> None:
    """Write the status once, then once more after setting each of ``messages`` as the run's message."""
    async def go() -> None:
        fake.loop = asyncio.get_running_loop()
        await status.write()
        for message in messages:
            status.status.message = message
            await status.write()
    asyncio.run(go())


def big_finding(facts: int) -> list[Finding]:
    """A finding whose facts are each within the first bound (4,000 characters) but ``facts`` of them together."""
    return [Finding(check="QueryRefused", severity=Severity.WARNING, message="m",
                    facts={f"fact{n}": "v" * 4000 for n in range(facts)})]


def shortened_condition(fake: FakeKube) -> dict[str, str]:
    conditions = written(fake)["conditions"]
    assert isinstance(conditions, list)
    return next(c for c in conditions if c["type"] == SHORTENED)


def warnings(fake: FakeKube) -> list[str]:
    return [e["message"] for (plural, _, _), e in fake.objects.items()
            if plural == "events" and e["reason"] == SHORTENED and e["type"] == "Warning"]


def test_a_message_of_two_megabytes_is_written_cut_and_the_cut_is_said() -> None:
    fake, status = recorder()
    status.status.message = "etcdserver said: " + "x" * 2_000_000
    write(fake, status, status.status.message)  # said once, not once per write
    message = written(fake)["message"]
    assert isinstance(message, str) and message.startswith("etcdserver said:") and len(message) <= 4096
    condition = shortened_condition(fake)
    assert condition["reason"] == "LongTextCut" and "status.message (2,000,017 characters)" in condition["message"]
    assert len(warnings(fake)) == 1


def test_a_write_refused_as_too_large_is_sent_again_shortened_never_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    """Texts each within the bound but 2 MB together: etcd refuses the object; the recorder shortens every text
    and writes again (before, the refusal left the run's daemon and kopf retried it for ever)."""
    monkeypatch.setattr(status_module, "MAX_STATUS_BYTES", 10**9)  # let the server be the one to refuse
    fake, status = recorder()
    status.status.collection = big_finding(500)

    write(fake, status)
    stored = written(fake)
    collection = stored["collection"]
    assert isinstance(collection, list) and len(collection[0]["facts"]["fact0"]) <= 256
    condition = shortened_condition(fake)
    assert condition["reason"] == "StatusTooLarge" and "cut to 256 characters" in condition["message"]
    assert any("too large" in message for message in warnings(fake))


def test_a_status_over_its_own_budget_is_shortened_before_the_server_refuses_it() -> None:
    fake, status = recorder()
    status.status.collection = big_finding(200)  # 800 KB

    write(fake, status)
    assert shortened_condition(fake)["reason"] == "StatusTooLarge"
    assert not [patch for patch in fake.status_patches if len(str(patch)) > status_module.MAX_STATUS_BYTES]


def test_the_condition_says_when_nothing_is_cut_any_more_and_names_the_cut_at_every_level() -> None:
    fake, status = recorder()
    status.status.message = "m" * 5000
    write(fake, status, "Succeeded")
    condition = shortened_condition(fake)
    assert (condition["status"], condition["reason"]) == ("False", "NothingCut")
    assert written(fake)["message"] == "Succeeded"


def test_past_the_first_level_the_condition_still_names_what_was_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(status_module, "MAX_STATUS_BYTES", 10**9)
    fake, status = recorder()
    status.status.message = "why the run ended"
    status.status.collection = big_finding(500)

    write(fake, status)
    condition = shortened_condition(fake)
    assert "status.collection[0].facts.fact0 (4,000 characters)" in condition["message"], condition
    assert written(fake)["message"] == "why the run ended"
