"""The engine: the only place that ties states, the journal and the adapters together.

One door (`Engine._step`): the observation built as data (`engine/observation.py`: the job's
status when the planner needs it, the journal's facts), one pure plan call (`plan()`), the
transition committed (write-ahead), exactly the effects `decide()` returned for it carried out
(`execute`), what each proved committed in turn. A driver's round (`Engine.round`) commits a
due cancel first, then steps until the planner holds. A failpoint sits after every commit and
after every effect, so crash tests can stop the process at each seam.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from vibesys.adapters.base import Progress
from vibesys.adapters.registry import entry
from vibesys.engine.adapter_access import Adapters, BackendFactory, registry_backend
from vibesys.engine.chains import submit_children
from vibesys.engine.clusters import lease_step
from vibesys.engine.context import new_invocation_id, record_environment
from vibesys.engine.execute import CancelResends, execute, spool_logs
from vibesys.engine.failpoints import after_commit, failpoint
from vibesys.engine.observation import (
    RetryPolicy,
    deadline_of,
    look,
    observed_context,
    settings_of,
)
from vibesys.engine.plan import (
    CarryOn,
    Commit,
    Hold,
    Redo,
    Step,
    needs_observation,
    plan,
    plan_cancel,
    proven,
)
from vibesys.engine.records import date_outage, record_step
from vibesys.engine.seen import Carried, ClaimRead, Deadline, Seen
from vibesys.engine.shared_poll import SharedPoll
from vibesys.errors import StaleState
from vibesys.journal_schema import Invocation, Journal, utc_now
from vibesys.osutil.proc import self_identity
from vibesys.states import Effect, Event, Finished, InfraFailed, JobState, Submit, Submitted

if TYPE_CHECKING:
    from vibesys.adapters.requests import AdapterRequest

__all__ = ["BackendFactory", "Engine", "new_invocation_id", "registry_backend"]

T = TypeVar("T")

#: A planner that never holds is a bug; stop it rather than spin.
MAX_STEPS = 64


def overdue(inv: Invocation, deadline: Deadline | None, now: datetime) -> str | None:
    """The cancel's `by` when `inv` is past its deadline and nobody asked for its cancel yet."""
    if deadline is None or inv.cancel_requested or inv.state is JobState.DONE:
        return None
    return deadline.by if deadline.left(now) <= 0 else None


class Engine:
    """Drives invocations: observe, plan, commit, execute. A service object, not a record:
    one per process (or per test), its caches and timers its own."""

    def __init__(
        self,
        journal: Journal,
        backends: BackendFactory = registry_backend,
        *,
        retry: RetryPolicy | None = None,
        lease_ttl: timedelta = timedelta(seconds=30),
        owner: str | None = None,
        unreachable_timeout: timedelta = timedelta(0),
        clock: Callable[[], datetime] = utc_now,
        progress: Progress | None = None,
    ) -> None:
        self.journal = journal
        self.adapters = Adapters(journal, backends, progress)
        #: the retry policy `prepare` records for a new invocation; every later step of an
        #: invocation uses the one recorded with it (its settings), whichever process takes it
        self.retry = RetryPolicy() if retry is None else retry
        self.lease_ttl = lease_ttl
        self.owner = self_identity() if owner is None else owner
        #: the unreachable timeout `prepare` records: how long a running job's scheduler may
        #: stay unreachable before its outcome is unknown (recorded, like `retry`)
        self.unreachable_timeout = unreachable_timeout
        self.clock = clock
        #: hears of transfers (staging, artifact downloads): a terminal's progress bar
        self.progress = progress
        #: the last thing an effect could not do, per invocation (shown by reconcile and run)
        self.notes: dict[str, str] = {}
        #: why a recorded invocation is not submitted yet (its campaign's queue), per invocation
        self.waiting: dict[str, str] = {}
        #: the provenance recorded for each (invocation, attempt), as far as this process knows
        self.provenance_seen: dict[tuple[str, int], dict[str, str]] = {}
        #: when this process last sent each attempt's cancel (`execute` sends it again)
        self.cancels = CancelResends()
        #: this process's side of the status rounds shared per site (engine/shared_poll.py)
        self.shared = SharedPoll(self)

    # -- recording -----------------------------------------------------------------------------

    def prepare(
        self,
        *,
        adapter: str,
        command: Sequence[str],
        request: AdapterRequest | None = None,
        label: str | None = None,
        max_retries: int | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        run_root: Path | None = None,
        invocation_id: str | None = None,
        cancel_when_orphaned: bool = False,
        campaign: str | None = None,
    ) -> Invocation:
        """Record a new invocation (PREPARED) with its request, its context and the settings
        every process carries it on with (this engine's retry policy and unreachable timeout),
        leased to us; at the end of its campaign's queue (`campaign`, else the request's own)."""
        request = request or entry(adapter).parse_request({})
        # The site configuration is read once, here at the latest (`vibesys run` read it while
        # checking the request): what is recorded is what every later process uses.
        site = request.site_record or request.read_site()
        invocation_id = invocation_id or new_invocation_id()
        root = run_root or self.journal.path.parent / "runs"
        invocation_dir = (root / invocation_id).resolve()
        env_file = record_environment(invocation_dir, dict(os.environ) if env is None else env)
        invocation = self.journal.create_invocation(
            invocation_id=invocation_id,
            adapter=adapter,
            command=list(command),
            request=request.recorded(),
            request_version=request.schema_version,
            label=label,
            max_retries=self.retry.max_retries if max_retries is None else max_retries,
            invocation_dir=str(invocation_dir),
            cwd=cwd or os.getcwd(),
            env_file=str(env_file),
            lease_owner=self.owner,
            lease_ttl=self.lease_ttl,
            site=site,
            settings=settings_of(self.retry, self.unreachable_timeout, cancel_when_orphaned),
            campaign=campaign or request.campaign(),
        )
        failpoint("after_prepare_commit")
        return invocation

    # -- one step at a time ---------------------------------------------------------------------

    def observe(self, inv: Invocation) -> Seen | None:
        """The adapter's view of `inv`'s attempt (`observation.look`)."""
        return look(self, inv)

    def advance(self, inv: Invocation, seen: Seen | None = None) -> Invocation:
        """Take every step that is possible now; return the invocation as last committed.

        `seen` is the adapter's view of the current attempt, fetched by the caller (who may
        batch it with others); when a step needs one and none is given, it is fetched here."""
        return self.round(inv, seen)[0]

    def round(
        self,
        inv: Invocation,
        seen: Seen | None = None,
        *,
        deadline: Deadline | None = None,
        interrupt: bool = False,
        hurry: bool = False,
        only_cancel: bool = False,
    ) -> tuple[Invocation, Seen | None]:
        """A driver's round: the cancel that is due first (`deadline` has passed, or an
        `interrupt`), then every step that is possible now (`hurry`: the first status asked
        for a cancelled job's shared round soon; `only_cancel`: no step). Returns the
        invocation as last committed and the first observation of its job (None: none)."""
        cancel_by = overdue(inv, deadline, self.clock()) or ("interrupt" if interrupt else None)
        if only_cancel and cancel_by is None:
            return inv, None
        shown = seen
        for _ in range(MAX_STEPS):
            hurry = hurry and shown is None
            done, seen = self._step(inv, seen, cancel_by, only_cancel, hurry=hurry)
            after = self.journal.invocations.get(inv.id) if done is None else done
            shown = shown or seen
            if after is inv or after.version == inv.version:
                return after, shown
            # A lookup that found the job also tells how it is doing: no second status call.
            adopted = (
                after.state is JobState.RUNNING
                and inv.state is not JobState.RUNNING
                and seen is not None
                and seen.job_id is not None
            )
            inv, seen = after, (seen if adopted else None)
        raise RuntimeError(f"the planner did not settle {inv.id} in {MAX_STEPS} steps")

    def step(self, inv: Invocation, seen: Seen | None) -> Invocation:
        """One decision of the planner, carried out (`_step`); `inv` itself: nothing written."""
        done = self._step(inv, seen)[0]
        return self.journal.invocations.get(inv.id) if done is None else done

    def _step(
        self,
        inv: Invocation,
        seen: Seen | None,
        cancel_by: str | None = None,
        only_cancel: bool = False,
        *,
        hurry: bool = False,
        planned: Commit | None = None,
    ) -> tuple[Invocation | None, Seen | None]:
        """One step through the door. Planned (unless `planned`, a commit asked for): a due
        cancel (`cancel_by`) as `plan_cancel` says (`only_cancel`: nothing else), else the
        observation built (the job's status when needed and not given, its outage dated, the
        journal's facts) and one plan call. Carried out: the event committed (write-ahead),
        exactly the effects it authorized (or the one to redo) carried out, and the event
        the planner makes of what they showed committed in turn (on the fresh row, if someone
        moved it meanwhile and it still applies), until one shows nothing. Returns the
        invocation as last committed (`inv` itself: nothing written; None: the first
        commit's compare-and-swap lost) and the status it was planned by (None: none
        needed, or none yet from a shared round, and nothing was decided)."""
        step: Step | None = planned
        if step is None and cancel_by is not None:
            step = plan_cancel(inv, cancel_by)
            if only_cancel and not isinstance(step, Commit):
                return inv, None
        if step is None or isinstance(step, Hold):
            if not needs_observation(inv):
                seen = None
            elif seen is None and (seen := look(self, inv, hurry=hurry)) is None:
                return inv, None  # a shared round will tell; nothing to decide before
            dated = None if seen is None else date_outage(self.journal, self.clock(), inv, seen)
            carrier: str | None = self.owner
            place = (
                self.journal.queue.queue_place(inv.id) if inv.state is JobState.PREPARED else None
            )
            while True:
                ctx = observed_context(self, inv, carrier, place)
                step = plan(inv, dated, ctx)
                if not isinstance(step, CarryOn):
                    break
                # The planner asks: carry the parent on first, then plan again (once).
                carried, carrier = self.carry_on(step.invocation_id), None
                if carried is not None and carried.failed is not None:
                    why = f"its parent {step.invocation_id} could not be carried on"
                    self.notes[inv.id] = f"{why}: {carried.failed}"
            self.waiting.pop(inv.id, None)
            if isinstance(step, Hold):
                held = inv.state is JobState.RETRYING and ctx.parent is not None
                if inv.state is JobState.PREPARED or held:
                    self.waiting[inv.id] = step.why
                return inv, seen
        event: Event | None = None
        effects: tuple[Effect, ...] = ()
        match step:
            case Redo(effect=effect):
                effects = (effect,)
            case Commit(event=event):
                if isinstance(event, Finished | InfraFailed) and seen is not None:
                    failpoint("after_terminal_observed")
            case _:
                raise AssertionError(step)
        first = True
        while event is not None or effects:
            if event is not None:
                try:
                    inv, decision = self.journal.commit_transition(inv, event, now=self.clock())
                except StaleState:
                    if first:
                        return None, seen
                    fresh = self.journal.invocations.get(inv.id)
                    if (fresh.state, fresh.attempt) != (inv.state, inv.attempt):
                        return fresh, seen
                    inv = fresh
                    continue
                first = False
                after_commit(type(event).__name__, inv.state is JobState.DONE)
                if isinstance(event, Submitted) and inv.attempt > 1:
                    # A retried parent's children are submitted again to wait on this attempt.
                    submit_children(self, inv, self.journal.invocations.active())
                effects = decision.effects
            event = None
            for effect in effects:
                # Before a submit, the campaign's cluster (when the adapter leases one).
                fact = lease_step(self, inv) if isinstance(effect, Submit) else None
                if fact is None:
                    steps = execute(self, inv, effect)
                    try:  # what it brings home is recorded before it goes on
                        while True:
                            record_step(self.journal, next(steps))
                    except StopIteration as end:
                        fact = end.value
                if fact is None:
                    continue
                if isinstance(fact, ClaimRead):
                    self.journal.invocations.record_attempt_detail(
                        inv.id, inv.attempt, claim=fact.claim
                    )  # before the event it proves
                event = proven(inv, fact, observed_context(self, inv))
            effects = ()
        return inv, seen

    # -- owner leases: who drives an invocation now ---------------------------------------------

    def hold(self, invocation_id: str) -> bool:
        """Take (or renew) the invocation's owner lease; False while another process holds it."""
        return self.journal.leases.acquire_lease(invocation_id, self.owner, self.lease_ttl)

    def let_go(self, invocation_id: str) -> None:
        self.journal.leases.release_lease(invocation_id, self.owner)

    def hold_all(self, invocation_ids: list[str]) -> set[str]:
        """`hold` for many in one transaction (reconcile): the ones taken."""
        return self.journal.leases.acquire_leases(invocation_ids, self.owner, self.lease_ttl)

    def let_go_all(self, invocation_ids: list[str]) -> None:
        self.journal.leases.release_leases(invocation_ids, self.owner)

    def deadline(self, invocation_id: str) -> Deadline | None:
        """The deadline recorded for the invocation (its bridge request's); None without one."""
        row = self.journal.bridge.recorded_evaluation_of(invocation_id)
        return None if row is None else deadline_of(row)

    def commit(self, inv: Invocation, event: Event) -> Invocation:
        """`try_commit`; when someone else moved `inv` first, the row as they left it."""
        done = self.try_commit(inv, event)
        return done if done is not None else self.journal.invocations.get(inv.id)

    def try_commit(self, inv: Invocation, event: Event) -> Invocation | None:
        """Commit `event` and carry out what it authorizes (`_step`); None when someone else
        moved `inv` first (nothing was committed)."""
        return self._step(inv, None, planned=Commit(event))[0]

    def carry_on(self, invocation_id: str) -> Carried | None:
        """A `CarryOn`: another invocation's steps that are possible now, through the same
        door (`advance`), holding its owner lease, with the deadline recorded with it; None
        when a live process drives it (its driver carries it on). A failure is the asker's
        to note (the invocation's own row tells the rest)."""
        if not self.hold(invocation_id):
            return None
        deadline, timed_out = None, None
        try:
            deadline = self.deadline(invocation_id)
            other = self.journal.invocations.get(invocation_id)
            timed_out = overdue(other, deadline, self.clock())
            if timed_out is not None:  # its deadline holds whoever carries it on
                self.request_cancel(other, timed_out)
            else:
                self.advance(other)
        except Exception as exc:  # its own row tells; whoever looks next carries it on
            return Carried(exc, timed_out is not None, deadline)
        finally:
            self.let_go(invocation_id)
        return Carried(None, timed_out is not None, deadline)

    # -- cancellation ---------------------------------------------------------------------------

    def request_cancel(self, inv: Invocation, by: str) -> Invocation:
        """Commit what the planner says a cancel commits now (`plan_cancel`) and carry out
        its effect: the cancel is sent, or the invocation settles at once."""
        while True:
            after = self._step(inv, None, by, only_cancel=True)[0]
            if after is not None:
                return after
            inv = self.journal.invocations.get(inv.id)

    def note(self, inv: Invocation, text: str) -> None:
        self.notes[inv.id] = text

    def spool(self, inv: Invocation) -> int:
        """Copy new log bytes of the current attempt home (remote adapters only); each new
        offset is recorded before the spool goes on."""
        if inv.attempt < 1:
            return 0
        backend, ref = self.adapters.backend(inv), self.adapters.job_ref(inv)
        steps = spool_logs(self.journal, backend, ref)
        try:
            while True:
                record_step(self.journal, next(steps))
        except StopIteration as end:
            return int(end.value)
