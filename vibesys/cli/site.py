"""`vibesys journal config INVOCATION`: the site configuration an invocation runs with (the
rendering recorded at PREPARED), and the one explicit way to change it (`--replace FILE`): an
operator whose site moved (a login node, a wrapper) records a new rendering, and the change is
a history row with its evidence (SiteReplaced), never a silent re-read of a file."""

from __future__ import annotations

import getpass
import json
import socket
from pathlib import Path

from vibesys.cli.common import make_engine, open_store
from vibesys.cli.read import echo, open_readonly
from vibesys.config.site import changed_keys
from vibesys.errors import UsageError, boundary
from vibesys.journal_schema import Invocation, Journal
from vibesys.states import JobState, SiteReplaced


def _recorded(journal: Journal, inv: Invocation) -> tuple[str, str, str]:
    if inv.site_digest is None:
        raise UsageError(
            f"invocation {inv.id} has no recorded site configuration (its adapter needs none, "
            "or it was recorded before vibesys kept them)"
        )
    found = journal.sites.site_rendering(inv.site_digest)
    if found is None:
        raise UsageError(f"the journal has no site configuration sha256:{inv.site_digest}")
    return found.digest, found.kind, found.text


def show_site(journal_path: Path | None, invocation: str, as_json: bool) -> None:
    """Print the recorded rendering exactly (or, with --json, with its digest and kind)."""
    with boundary(journal_path):
        journal = open_readonly(journal_path)
        inv = journal.invocations.resolve(invocation)
        digest, kind, text = _recorded(journal, inv)
    if as_json:
        shown = {"invocation": inv.id, "digest": digest, "kind": kind, "rendering": text}
        echo(json.dumps(shown, indent=2))
    else:
        echo(text.rstrip("\n"))


def replace_site(
    journal_path: Path | None, invocation: str, file: Path, profile: str | None
) -> None:
    """Record the site configuration in `file` for the invocation, from its next step on."""
    journal = open_store(journal_path)
    engine = make_engine(journal)
    inv = journal.invocations.resolve(invocation)
    if inv.state is JobState.DONE:
        raise UsageError(f"invocation {inv.id} is DONE: nothing carries it on any more")
    # One recorded before sites were (it reads the file its request names) may be given one.
    old = engine.adapters.recorded_site(inv.site_digest)
    request = engine.adapters.request_of(inv)
    new = request.read_site_from(str(file.expanduser().resolve()), profile)
    if old is not None and new.kind != old.kind:
        raise UsageError(f"{file} is a {new.kind}, the invocation runs with a {old.kind}")
    if old is not None and new.digest == old.digest:
        echo(f"{inv.id}: unchanged (sha256:{new.digest})")
        return
    changed = ", ".join(changed_keys(old, new)) if old is not None else "(none was recorded)"
    before = old.digest if old is not None else None
    journal.sites.record_site(new)
    event = SiteReplaced(
        old_digest=before or "",
        new_digest=new.digest,
        source=str(file.expanduser().resolve()),
        changed=changed,
        by=f"{getpass.getuser()}@{socket.gethostname()}",
    )
    while journal.invocations.get(inv.id).state is not JobState.DONE:
        current = journal.invocations.get(inv.id)
        if current.site_digest != before:
            raise UsageError(f"invocation {inv.id}: its site configuration changed meanwhile")
        if engine.try_commit(current, event) is not None:
            was = f"sha256:{before[:12]}" if before else "none"
            echo(f"{inv.id}: {was} -> sha256:{new.digest[:12]} ({changed})")
            return
    raise UsageError(f"invocation {inv.id} ended meanwhile: nothing carries it on any more")
