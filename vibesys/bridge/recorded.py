"""An evaluation as the journal records it: a request row checked against a request sent
again (the same user, the same request, the same values of its variables), and the evaluation
a row stands for, rebuilt when a restarted session carries it on."""

from __future__ import annotations

import threading
from collections.abc import Mapping

import msgspec

from vibesys.bridge.admission import Evaluation, Refusal
from vibesys.bridge.protocol import first_difference
from vibesys.client import Handle as InvocationHandle
from vibesys.engine import StopFlag
from vibesys.engine.context import load_context
from vibesys.errors import VibesysError
from vibesys.job_result import JobResult
from vibesys.journal_schema import Invocation, Journal
from vibesys.journal_schema.recorded_evaluations import RecordedEvaluation

__all__ = ["Handle", "evaluation_of", "invocation_exists", "same_evaluation", "same_values"]


class Handle(msgspec.Struct):
    """One evaluation as this bridge serves it: the request's row, its invocation's client
    handle (`job`: this bridge drives it) and its driver's state."""

    row: RecordedEvaluation
    evaluation: Evaluation
    job: InvocationHandle
    stop: StopFlag = msgspec.field(default_factory=StopFlag)
    done: threading.Event = msgspec.field(default_factory=threading.Event)
    result: JobResult | None = None
    #: why this session stopped serving it (teardown), for the helpers still connected
    stopping: str | None = None

    @property
    def invocation_id(self) -> str:
        return self.row.invocation_id


def same_evaluation(row: RecordedEvaluation, evaluation: Evaluation) -> None:
    if row.uid != evaluation.uid:
        raise Refusal(
            f"request id {evaluation.request_id} belongs to another user; use a new request id",
            "request_id",
        )
    differs = first_difference(row.body, evaluation.body())
    if differs is not None:
        raise Refusal(
            f"request id {evaluation.request_id} was sent before with another {differs}; "
            "use a new request id for another request",
            differs,
        )


def same_values(recorded: Mapping[str, str], evaluation: Evaluation) -> None:
    for name, value in evaluation.env.items():
        if recorded.get(name) != value:
            raise Refusal(
                f"request id {evaluation.request_id} was sent before with another value of "
                f"{name}; use a new request id for another request",
                "env",
            )


def evaluation_of(row: RecordedEvaluation, inv: Invocation) -> Evaluation:
    """The evaluation a row records, with the values of its variables as recorded with its
    invocation (a reattaching helper must send the same)."""
    try:
        recorded = load_context(inv).env
    except VibesysError:  # its driver reports that; a helper sending values is refused
        recorded = {}
    body = row.body
    return Evaluation(
        request_id=row.request_id,
        run_id=row.run_id,
        workspace=row.workspace,
        kind=row.kind,
        argv=tuple(body.get("argv", ())),
        timeout_requested=body.get("timeout_seconds"),
        timeout_seconds=int(body.get("effective_timeout_seconds") or 0),
        env={name: recorded[name] for name in body.get("env", []) if name in recorded},
        artifacts=tuple(body.get("artifacts", [])),
        uid=row.uid,
        profiler=body.get("profiler"),
    )


def invocation_exists(journal: Journal, invocation_id: str) -> bool:
    found = journal.conn.execute("SELECT 1 FROM invocations WHERE id=?", (invocation_id,))
    return found.fetchone() is not None
