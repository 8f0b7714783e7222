"""An event cannot carry a failure class that contradicts it: an infrastructure failure is never
recorded as the command's end, nor the command's own end as an infrastructure failure."""

from __future__ import annotations

import pytest

from tests.states.state_strategies import OUTCOME_OF_CLASS, RETRYABLE_CLASSES
from vibesys.journal_schema import decode_event
from vibesys.states import OUTCOME_OF, RETRYABLE, FailureClass, Finished, InfraFailed


def test_the_classes_are_those_of_the_design() -> None:
    """The product's constants against the hand-written oracle: adding APPLICATION_FAILED to
    the retryable classes (a blind retry) fails here."""
    assert frozenset(RETRYABLE) == RETRYABLE_CLASSES
    assert dict(OUTCOME_OF) == OUTCOME_OF_CLASS
    assert set(FailureClass) == RETRYABLE_CLASSES | set(OUTCOME_OF_CLASS)


@pytest.mark.parametrize("failure", sorted(set(FailureClass) - set(OUTCOME_OF_CLASS)))
def test_finished_refuses_infrastructure_classes(failure: FailureClass) -> None:
    with pytest.raises(ValueError, match="InfraFailed"):
        Finished(failure, None)


@pytest.mark.parametrize("failure", sorted(OUTCOME_OF_CLASS))
def test_finished_takes_the_commands_own_ends(failure: FailureClass) -> None:
    assert Finished(failure, 0).failure_class is failure


@pytest.mark.parametrize("failure", sorted(RETRYABLE_CLASSES))
def test_infra_failed_takes_infrastructure_classes(failure: FailureClass) -> None:
    assert InfraFailed(failure, "observation").failure_class is failure


@pytest.mark.parametrize("failure", sorted(set(FailureClass) - RETRYABLE_CLASSES))
def test_infra_failed_refuses_the_commands_own_end(failure: FailureClass) -> None:
    with pytest.raises(ValueError, match="Finished"):
        InfraFailed(failure, "observation")


def test_a_journal_row_that_breaks_the_rule_does_not_decode() -> None:
    from vibesys.errors import NotAJournal

    with pytest.raises(NotAJournal):
        decode_event("Finished", '{"failure_class": "PREEMPTED", "exit_code": null}')
