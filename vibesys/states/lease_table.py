"""The cluster lease's transition table: the life of an allocation vibesys holds itself (a
campaign's SkyPilot cluster). Data, like the job table: the journal's lease records
(`journal_schema/clusters.py`) move a lease only along these rows, `validate_table` checks it
as it checks the job table, and docs/architecture.md draws it.

`launching` and `releasing` are intents: the effect may or may not have happened, and the live
process carrying it out is left alone until it is provably dead; then `reconcile` settles the
row from what the control plane shows. A lease is created `launching` (a launch intended), or
`up` when a refresh finds a cluster nobody recorded (adopted). A row with `dest: None` is
internal: the lease stays where it is. A note (evidence alone) is no transition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any, Final

from msgspec import Struct

from vibesys.states.validate import validate_table


class LeaseState(StrEnum):
    LAUNCHING = "launching"
    UP = "up"
    FAILED = "failed"
    LOST = "lost"
    RELEASING = "releasing"
    RELEASED = "released"


L = LeaseState

LIVE_LEASE_STATES: Final = (L.LAUNCHING, L.UP, L.RELEASING)
LEASE_INITIAL: Final = L.LAUNCHING
LEASE_TERMINAL: Final = frozenset({L.FAILED, L.LOST, L.RELEASED})

LEASE_TRANSITIONS: Final[list[dict[str, Any]]] = [
    # A launch intended again (the earlier one was interrupted) continues the row.
    {"trigger": "LaunchIntended", "source": [L.LAUNCHING], "dest": None},
    # The launch left the cluster up (also: a launch found completed).
    {"trigger": "Launched", "source": [L.LAUNCHING, L.UP], "dest": L.UP},
    # Proven: the launch left no cluster.
    {"trigger": "LaunchFailed", "source": [L.LAUNCHING], "dest": L.FAILED},
    # A refresh found it up (an interrupted launch that succeeded, or its allocation learnt).
    {"trigger": "FoundUp", "source": [L.LAUNCHING, L.UP], "dest": L.UP},
    # The allocation ended under it: a refresh found none, or another allocation.
    {"trigger": "Lost", "source": [L.UP], "dest": L.LOST},
    # An attempt is submitted onto it: only while it is up.
    {"trigger": "Used", "source": [L.UP], "dest": None},
    # The intent to release; intended again, the interrupted release is continued.
    {"trigger": "ReleaseIntended", "source": list(LIVE_LEASE_STATES), "dest": L.RELEASING},
    # The release ended it (also: a refresh found it gone while releasing).
    {"trigger": "Released", "source": [L.RELEASING], "dest": L.RELEASED},
]


def lease_sources_of(row: Mapping[str, Any]) -> list[LeaseState]:
    return [L(s) for s in row["source"]]


def lease_dest_of(row: Mapping[str, Any]) -> LeaseState | None:
    return None if row["dest"] is None else L(row["dest"])


def _rows_by_trigger() -> dict[str, Mapping[str, Any]]:
    return {row["trigger"]: row for row in LEASE_TRANSITIONS}


_BY_TRIGGER: Final = _rows_by_trigger()


def lease_sources(trigger: str) -> tuple[LeaseState, ...]:
    """The states `trigger` may happen in, in the table's order."""
    return tuple(lease_sources_of(_BY_TRIGGER[trigger]))


_validated = False


def lease_next(state: LeaseState, trigger: str) -> LeaseState | None:
    """The state after `trigger` in `state` (the same state for an internal row); None when
    the table has no such row. The table is validated on the first use (not at import:
    reading the journal moves no lease)."""
    global _validated
    if not _validated:
        validate_table(LEASE_TRANSITIONS, LeaseState, LEASE_INITIAL, LEASE_TERMINAL)
        _validated = True
    row = _BY_TRIGGER[trigger]
    if state not in lease_sources_of(row):
        return None
    return lease_dest_of(row) or state


class LeaseChoice(StrEnum):
    """What an attempt does about its campaign's cluster before it is submitted."""

    REFUSE = "refuse"  # another evaluation of the campaign may still run there
    REUSE = "reuse"  # the cluster is up and fits: submit onto it
    LAUNCH = "launch"  # no usable cluster: intend a launch, then launch it


class LeaseDecision(Struct, frozen=True):
    choice: LeaseChoice
    #: why an attempt is refused (empty otherwise)
    why: str = ""


def decide_lease(
    invocation_id: str, campaign: str, unfinished_users: Sequence[str], reusable: bool
) -> LeaseDecision:
    """One remote evaluation at a time per campaign: an attempt is refused while another
    invocation that ran on one of the campaign's clusters is not DONE (running, retrying, or
    unresolved: its job may still run there); otherwise it reuses the cluster when the adapter
    found one up and fitting, else launches one. Pure: the lease rows are read by the caller."""
    others = [user for user in unfinished_users if user != invocation_id]
    if others:
        return LeaseDecision(
            LeaseChoice.REFUSE,
            f"campaign {campaign} is busy with invocation(s) {', '.join(others)} (one evaluation "
            "at a time per campaign): wait for them or cancel them, then run this again",
        )
    return LeaseDecision(LeaseChoice.REUSE if reusable else LeaseChoice.LAUNCH)


class LeaseOutcome(StrEnum):
    """What a launch or release left, as the journal records it (one lease table trigger
    each, or a note); for one whose process is gone, from a refreshed inspection
    (`settle_lease`)."""

    #: an interrupted release, the cluster still there: no record, the release is done again
    RELEASE_AGAIN = "release again"
    RELEASED = "released"  # the release ended it (Released)
    UP = "up"  # the launch left it up (Launched)
    #: nothing moved, a note on the row: no cluster up yet but one may exist (the lease stays
    #: `launching`), or a release that failed (it stays where it was)
    NOTED = "noted"
    LAUNCH_FAILED = "launch failed"  # proven: the launch left no cluster (LaunchFailed)


def settle_lease(state: LeaseState, *, exists: bool, up: bool, launching: bool) -> LeaseOutcome:
    """The settlement of an unsettled lease (`launching` or `releasing`, its process gone)
    from a refreshed inspection: whether the cluster exists, is up, or a launch request is
    still active. Pure: the inspection is the caller's."""
    if state is L.RELEASING:
        if exists:
            return LeaseOutcome.RELEASE_AGAIN
        return LeaseOutcome.RELEASED
    if up:
        return LeaseOutcome.UP
    if exists or launching:
        return LeaseOutcome.NOTED
    return LeaseOutcome.LAUNCH_FAILED
