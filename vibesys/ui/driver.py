"""Who drives an unfinished invocation, as far as this view can tell from the journal, this
host's processes and the clock.

A `vibesys` process drives an invocation while it holds its lease (host:pid:start, expiry)
and renews it. The view claims a driver only while that holds: a holder on this host that is
gone drives nothing, whatever the expiry says; a lease past its expiry whose holder is on
another host drives nothing either (no one renewed it). A holder on this host that lives keeps
its lease past expiry (`lease_free`: it may be blocked in a slow submit), and the view says
exactly that. Nothing here writes: liveness is read from /proc.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from vibesys.journal_schema.clock import iso
from vibesys.journal_schema.records import Invocation
from vibesys.osutil.proc import identity_alive
from vibesys.states import JobState

CARRY_ON = "`vibesys reconcile` or `vibesys wait` carries it on"


class Driver(msgspec.Struct, frozen=True):
    #: whether a process drives it now; None for a DONE invocation (nothing to drive)
    driven: bool | None
    owner: str | None
    expires_at: datetime | None
    #: whether the holder lives (None: on another host, or no holder)
    alive: bool | None
    #: since when nothing drives it, where the journal says (the lease's expiry)
    since: datetime | None
    text: str

    def to_json(self) -> dict[str, Any]:
        return {
            "driven": self.driven,
            "owner": self.owner,
            "lease_expires_at": None if self.expires_at is None else iso(self.expires_at),
            "owner_alive": self.alive,
            "undriven_since": None if self.since is None else iso(self.since),
            "text": self.text,
        }


def driver(inv: Invocation, now: datetime) -> Driver:
    owner, expires = inv.lease_owner, inv.lease_expires_at
    if inv.state is JobState.DONE:
        return Driver(None, owner, expires, None, None, "")
    alive = identity_alive(owner) if owner else None
    expired = expires is None or expires <= now
    if owner is None:
        return Driver(False, None, expires, None, None, f"no process drives it; {CARRY_ON}")
    if alive is False:
        since = expires if expired else None
        when = f" since {iso(since)}" if since else ""
        text = f"no process drives it{when} ({owner} has exited); {CARRY_ON}"
        return Driver(False, owner, expires, False, since, text)
    if alive is None and expired:
        when = f" since {iso(expires)}" if expires else ""
        text = f"no process drives it{when} (the lease of {owner} expired); {CARRY_ON}"
        return Driver(False, owner, expires, None, expires, text)
    return Driver(
        True, owner, expires, alive, None, f"driven by {owner} ({lease_note(expires, now)})"
    )


def lease_note(expires: datetime | None, now: datetime) -> str:
    stamp = "" if expires is None else iso(expires)
    if expires is None or expires <= now:  # a live holder on this host keeps it (see the doc)
        return f"its lease expired at {stamp}; the process lives"
    return f"lease until {stamp}"
