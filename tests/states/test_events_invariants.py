"""An event cannot carry a failure class that contradicts it: an infrastructure failure is never
recorded as the command's end, nor the command's own end as an infrastructure failure."""

from __future__ import annotations

import pytest

from vibesys.journal_schema import decode_event
from vibesys.states import OUTCOME_OF, RETRYABLE, FailureClass, Finished, InfraFailed


@pytest.mark.parametrize("failure", sorted(set(FailureClass) - set(OUTCOME_OF)))
def test_finished_refuses_infrastructure_classes(failure: FailureClass) -> None:
    with pytest.raises(ValueError, match="InfraFailed"):
        Finished(failure, None)


@pytest.mark.parametrize("failure", sorted(set(FailureClass) - RETRYABLE))
def test_infra_failed_refuses_the_commands_own_end(failure: FailureClass) -> None:
    with pytest.raises(ValueError, match="Finished"):
        InfraFailed(failure, "observation")


def test_a_journal_row_that_breaks_the_rule_does_not_decode() -> None:
    from vibesys.errors import NotAJournal

    with pytest.raises(NotAJournal):
        decode_event("Finished", '{"failure_class": "PREEMPTED", "exit_code": null}')
