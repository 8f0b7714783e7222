"""An infrastructure failure, retried: the first attempt's node fails, the second completes.

`FakeBackend` is the scripted, in-memory adapter the tests use. Here its first submitted job
reports RUNNING, then NODE_FAIL; the second reports RUNNING, then COMPLETED with exit code 0.
NODE_FAILED is one of the retryable failure classes, so the engine records InfraFailed
(RUNNING -> RETRYING), waits out the backoff, and submits attempt 2 under a new stable job name.
An application failure (a non-zero exit) would never be retried.

    python examples/fake_backend_retry.py [JOURNAL]
"""

from __future__ import annotations

import sys

from vibesys.adapters.base import RemoteState
from vibesys.adapters.fake import FAKE_ENTRY, FakeAttempt, FakeBackend
from vibesys.adapters.registry import register
from vibesys.engine import DriveOptions, Engine, RetryPolicy, drive
from vibesys.journal_schema import journal_path, open_journal, verify_journal


def main(argv: list[str]) -> int:
    register(FAKE_ENTRY)  # one registry line makes the scripted adapter an adapter like the others
    fake = FakeBackend(
        attempts=[
            FakeAttempt(states=(RemoteState.RUNNING, RemoteState.NODE_FAIL), exit_code=None),
            FakeAttempt(states=(RemoteState.RUNNING, RemoteState.COMPLETED), exit_code=0),
        ]
    )
    journal = open_journal(journal_path(argv[0] if argv else None))
    try:
        engine = Engine(
            journal,
            lambda *_: fake,  # every adapter (name, request) resolves to this scripted backend
            retry=RetryPolicy(max_retries=2, initial_delay_seconds=0.05),
        )
        invocation = engine.prepare(adapter="fake", command=["python", "eval.py"], label="retry")
        invocation = drive(engine, invocation, DriveOptions())

        print(f"invocation {invocation.id}")
        print(f"state {invocation.state} outcome {invocation.outcome} exit {invocation.exit_code}")
        print(f"attempts {invocation.attempt}, retries {invocation.retries}")
        print(f"submitted jobs: {', '.join(fake.submits())}")
        print("attempts:")
        for attempt in journal.invocations.attempts(invocation.id):
            print(f"  {attempt.attempt}  {attempt.job_name}  {attempt.failure_class}")
        print("history:")
        for row in journal.invocations.history(invocation.id):
            evidence = " ".join(f"{k}={v}" for k, v in row.evidence.items() if v not in ("", None))
            print(f"  {row.seq:>2}  {row.from_state} -> {row.to_state}  {row.event}  {evidence}")
        problems = verify_journal(journal)
        print("journal verify: " + ("ok" if not problems else str(problems[0])))
        retried = invocation.attempt == 2 and len(fake.submits()) == 2 == len(fake.ran)
        return 0 if retried and invocation.outcome == "COMPLETED" and not problems else 1
    finally:
        journal.close()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
