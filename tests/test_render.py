"""The exit-status contract of `vibesys run` and `vibesys wait`, written out by hand.

README: the command's own status when it ran to an end (137 for SIGKILL), 75 when
infrastructure failures spent the retry budget, 4 when the outcome is UNRESOLVED, 130 when
interrupted (the job is cancelled first), 66 when the invocation it runs after failed, 2 for
bad input; 0 while a detached job runs. `reconcile`: 4 before 69 (left waiting) before 0.
74 (our output broke) and 73 (the journal could not be written mid-run) are the process's own,
not the invocation's: tests/test_cli_robustness.py and tests/test_journal_faults.py hold them.
The table below is the oracle; it never reads the constants of `vibesys.cli.render`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from msgspec import structs

from tests.helpers.journal import create
from vibesys.cli.render import reconcile_status, show, summary
from vibesys.journal_schema import HistoryRow, Invocation, Journal, open_journal
from vibesys.states import JobState, Outcome
from vibesys.states.exits import exit_status

S, Out = JobState, Outcome

#: (state, outcome, recorded exit code) -> the exit status of `run` and `wait`
EXIT_STATUS_ORACLE: list[tuple[tuple[JobState, Outcome | None, int | None], int]] = [
    ((S.DONE, Out.COMPLETED, 0), 0),
    ((S.DONE, Out.APPLICATION_FAILED, 3), 3),
    ((S.DONE, Out.APPLICATION_FAILED, 137), 137),  # SIGKILL
    ((S.DONE, Out.APPLICATION_FAILED, 143), 143),  # SIGTERM, or its own time limit
    ((S.DONE, Out.APPLICATION_FAILED, 255), 255),
    ((S.DONE, Out.APPLICATION_FAILED, None), 1),  # failed, status unknown: still a failure
    ((S.DONE, Out.APPLICATION_FAILED, 0), 1),  # never 0 for a failure
    ((S.DONE, Out.INFRA_FAILED, None), 75),
    ((S.DONE, Out.INFRA_FAILED, 0), 75),  # the last attempt's code does not matter
    ((S.DONE, Out.INFRA_FAILED, 137), 75),
    ((S.DONE, Out.CANCELLED, None), 130),
    ((S.DONE, Out.CANCELLED, 143), 130),
    ((S.DONE, Out.REJECTED, None), 2),
    ((S.DONE, Out.MISCONFIGURED, None), 78),  # a person must fix the configuration first
    ((S.DONE, Out.DEPENDENCY_FAILED, None), 66),  # its parent failed; never 130 (interrupt)
    ((S.DONE, None, None), 1),  # DONE without an outcome is a broken record: never success
    ((S.UNRESOLVED, None, None), 4),
    ((S.UNRESOLVED, None, 0), 4),  # a stale code never turns "unknown" into success
    # Still active (`run --detach`, or `wait` interrupted): the job runs, nothing failed yet.
    ((S.PREPARED, None, None), 0),
    ((S.SUBMITTING, None, None), 0),
    ((S.RUNNING, None, None), 0),
    # The job ended, but its results are not home: the outcome is not reported as final.
    ((S.COLLECTING, None, 0), 4),
    ((S.RETRYING, None, None), 0),
]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Invocation:
    journal: Journal = open_journal(tmp_path_factory.mktemp("render") / "journal.db")
    try:
        return create(journal, "inv-exit")
    finally:
        journal.close()


def test_the_oracle_covers_every_state_and_every_outcome() -> None:
    given = [case for case, _ in EXIT_STATUS_ORACLE]
    assert {state for state, _, _ in given} == set(JobState)
    assert {outcome for state, outcome, _ in given if state is S.DONE} == {*Outcome, None}


def case_id(value: object) -> str:
    if isinstance(value, tuple):
        return "-".join(str(part) for part in value)
    return str(value)


@pytest.mark.parametrize(("given", "status"), EXIT_STATUS_ORACLE, ids=case_id)
def test_exit_status(
    base: Invocation, given: tuple[JobState, Outcome | None, int | None], status: int
) -> None:
    state, outcome, exit_code = given
    inv = structs.replace(base, state=state, outcome=outcome, exit_code=exit_code)
    assert exit_status(inv) == status


@pytest.mark.parametrize(
    ("failed", "waiting", "status"),
    [
        (False, False, 0),
        (False, True, 69),  # left as it is within its unreachable timeout: look again later
        (True, False, 4),
        (True, True, 4),  # an UNRESOLVED invocation (or a failed row) is the first news
    ],
)
def test_reconcile_status(failed: bool, waiting: bool, status: int) -> None:
    assert reconcile_status(failed, waiting) == status


def test_the_readme_states_the_same_contract() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    contract = " ".join(readme.split())
    for phrase in (
        "75 when infrastructure failures spent the retry budget",
        "78 when a configuration or security failure",
        "74 when its own output broke",
        "73 when the journal could not be written while the invocation was recorded or driven",
        "4 when the outcome is UNRESOLVED",
        "130 when interrupted",
        "2 for bad input",
        "66 when the invocation it runs after (`--after`) ended without success",
        "69 when an invocation is left as it is",
    ):
        assert phrase in contract, phrase


@pytest.mark.parametrize(
    ("retries", "budget", "line"),
    [
        (0, 2, "retries         0 of 2"),
        (1, 2, "retries         1 of 2"),
        (2, 2, "retries         2 of 2"),
        (3, 2, "retries         2 of 2 (3 infrastructure failures)"),  # not "3 of 2"
        (1, 0, "retries         0 of 0 (1 infrastructure failures)"),
    ],
)
def test_show_never_reports_more_retries_than_the_budget(
    base: Invocation, retries: int, budget: int, line: str
) -> None:
    inv = structs.replace(base, retries=retries, max_retries=budget)
    assert line in show(inv, [], []).splitlines()


def test_show_names_the_invocation_directory(base: Invocation) -> None:
    lines = show(base, [], []).splitlines()
    assert f"invocation dir  {base.invocation_dir}" in lines
    # every field's value starts in one column, after the longest label
    assert lines[0] == f"invocation      {base.id}"


@pytest.mark.parametrize(
    ("outcome", "evidence", "cause"),
    [
        (
            Outcome.MISCONFIGURED,
            {"reason": "host key changed", "fix": "verify it"},
            ": host key changed; fix: verify it",
        ),
        (Outcome.INFRA_FAILED, {"failure_class": "NODE_FAILED", "retries": 2}, ""),
        (Outcome.COMPLETED, {"observation": "logs home"}, ""),
    ],
)
def test_the_last_line_names_the_cause_when_the_command_did_not_decide(
    base: Invocation, outcome: Outcome, evidence: dict[str, object], cause: str
) -> None:
    inv = structs.replace(base, state=S.DONE, outcome=outcome)
    last = HistoryRow(9, S.SUBMITTING, S.DONE, "X", "t", evidence)
    line = summary(inv, last)
    assert line.endswith(cause) if cause else ":" not in line.split("attempt")[-1]
