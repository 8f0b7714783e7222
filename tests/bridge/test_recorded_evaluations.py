"""The journal's request ids (m010): the first row of a request id wins, whoever claims it
again later; reads by id, by invocation, and a campaign's requests in order."""

from __future__ import annotations

from vibesys.journal_schema import Journal


def claim(
    journal: Journal, request_id: str, invocation_id: str, **changes: object
) -> tuple[object, bool]:
    values: dict[str, object] = {
        "run_id": "campaign-1",
        "request_id": request_id,
        "invocation_id": invocation_id,
        "uid": 1000,
        "workspace": "/ws/a",
        "kind": "accuracy",
        "body": {"argv": ["true"]},
        "results_dir": "/results",
    }
    values.update(changes)
    return journal.bridge.claim_evaluation(**values)  # type: ignore[arg-type]


def test_the_first_claim_of_a_request_id_wins(journal: Journal) -> None:
    first, created = claim(journal, "r-1", "inv-a")
    assert created is True
    again, created = claim(journal, "r-1", "inv-b", uid=2000, body={"argv": ["false"]})
    assert created is False and again == first
    assert journal.bridge.recorded_evaluation("campaign-1", "r-1") == first
    assert (
        journal.bridge.recorded_evaluation_of("inv-a") == first
        and journal.bridge.recorded_evaluation_of("inv-b") is None
    )
    assert first.invocation_id == "inv-a" and first.uid == 1000 and first.body == {"argv": ["true"]}  # type: ignore[attr-defined]


def test_request_ids_are_per_campaign_and_listed_in_order(journal: Journal) -> None:
    claim(journal, "r-1", "inv-1")
    claim(journal, "r-1", "inv-2", run_id="campaign-2")
    claim(journal, "r-2", "inv-3")
    assert [r.invocation_id for r in journal.bridge.campaign_evaluations("campaign-1")] == [
        "inv-1",
        "inv-3",
    ]
    assert [r.invocation_id for r in journal.bridge.campaign_evaluations("campaign-2")] == ["inv-2"]
    assert journal.bridge.recorded_evaluation("campaign-3", "r-1") is None


def test_the_queue_position_counts_the_campaigns_open_earlier_ones(journal: Journal) -> None:
    from vibesys.bridge.queue import queue_position
    from vibesys.states import Cancelled

    for n, campaign in ((1, "campaign-1"), (2, "campaign-2"), (3, "campaign-1"), (4, "campaign-1")):
        journal.create_invocation(
            invocation_id=f"inv-{n}",
            adapter="local",
            command=["true"],
            request={},
            label=None,
            max_retries=0,
            invocation_dir=f"/runs/inv-{n}",
            campaign=campaign,
        )
    assert queue_position(journal, "inv-1") == 0
    assert queue_position(journal, "inv-4") == 2  # inv-1 and inv-3, not campaign-2's inv-2
    assert queue_position(journal, "inv-2") == 0
    journal.commit_transition(journal.invocations.get("inv-1"), Cancelled("done with it"))
    assert queue_position(journal, "inv-4") == 1
    assert queue_position(journal, "inv-unknown") == 0  # in no queue: nothing ahead
