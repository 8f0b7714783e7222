"""What the engine makes of a refused login (CredentialRefused), with the oracles written out:
before a submission, MISCONFIGURED with the renewal; with a job that may exist, the attempt is
held as in an outage (its job left alone) while its unreachable timeout lasts, then UNRESOLVED,
and each of those says the credential and the renewal rather than "unreachable"."""

from __future__ import annotations

from datetime import timedelta

from msgspec.structs import replace

from vibesys.engine.execute import error_facts
from vibesys.engine.observation import RetryPolicy
from vibesys.engine.observe import seen_error
from vibesys.engine.plan import Commit, Hold, PlanContext, event_for_submit_error, plan
from vibesys.engine.plan_table import NOW, SITUATIONS
from vibesys.engine.seen import Sight
from vibesys.errors import CredentialRefused
from vibesys.journal_schema import iso
from vibesys.states import Misconfigured, OutcomeUnknown

CERT = "/home/op/.ssh/id_ed25519-cert.pub"
SAID = f"connect to op@login:22: login refused: the SSH certificate {CERT} expired at T"
FIX = f"renew the SSH certificate {CERT} with the site's tool"


def refused(maybe_submitted: bool) -> CredentialRefused:
    return CredentialRefused(
        SAID, credential=CERT, fix=FIX, evidence=SAID, maybe_submitted=maybe_submitted
    )


def test_a_submit_whose_login_is_refused_is_misconfigured_with_the_renewal() -> None:
    event = event_for_submit_error(error_facts(refused(False)), iso(NOW))
    assert event == Misconfigured(SAID, FIX)


def test_a_submit_that_may_have_gone_through_stays_unknown_whatever_refused_it() -> None:
    event = event_for_submit_error(error_facts(refused(True)), iso(NOW))
    assert event == OutcomeUnknown(f"the submit may have gone through: {SAID}")


def test_a_running_job_behind_a_refused_login_is_held_then_unresolved_naming_it() -> None:
    running = dict(SITUATIONS)["RUNNING"]
    seen = seen_error(refused(False), since=NOW - timedelta(minutes=4))
    assert (seen.sight, seen.fix, seen.final) == (Sight.UNREACHABLE, FIX, False)
    ctx = PlanContext(NOW, RetryPolicy(), unreachable_timeout=timedelta(minutes=10))
    since = iso(NOW - timedelta(minutes=4))
    assert plan(running, seen, ctx) == Hold(f"login refused since {since}: {SAID}; fix: {FIX}")
    spent = replace(seen, since=NOW - timedelta(minutes=11))
    assert plan(running, spent, ctx) == Commit(OutcomeUnknown(f"login refused: {SAID}; fix: {FIX}"))
