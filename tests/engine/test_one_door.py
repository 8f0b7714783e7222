"""Every journal write by engine code goes through the engine's commit modules: `core.py`, the
commit of a planned transition (and the owner leases that say which process drives an
invocation), and `records.py`, the recorded result of an observation or of a named effect (a
collection's log offsets and artifacts, a cluster lease's intents and outcomes, a status
round's and a probe's observations). The effects themselves (`execute.py`, with the log spool,
`artifacts.py`, `clusters.py`, `shared_poll.py`) return or yield what they showed and never
write. A write anywhere else in `vibesys/engine/` fails here.

One protocol stays outside, named below: the coordination of a site's shared status round
among processes (`shared_poll.py`). `take_poller` takes the site's poller lease before a round
or a probe and `release_poller` gives it back when one fails; `watch` registers the
invocations a process wants observed; `advance_due` asks for the next round soon (a cancel was
sent). They decide nothing about any invocation, commit no transition and authorize no effect
on a job: the most they authorize is an observation (one batched status call or marker probe),
whose results go through `records.py` like any other. They are to the round what the owner
lease is to an invocation, except that they are shared by processes that drive different
invocations, so they belong to the round's own module. An entry no longer used fails too."""

from __future__ import annotations

import ast
from pathlib import Path

import vibesys.engine

ENGINE = Path(vibesys.engine.__file__).parent

#: The journal's write methods (the facade's and its stores').
WRITES = frozenset(
    {
        "commit_transition",
        "create_invocation",
        "write_txn",
        "record_attempt_detail",
        "mark_unreachable",
        "clear_unreachable",
        "acquire_lease",
        "acquire_leases",
        "release_lease",
        "release_leases",
        "commit_spool_offset",
        "record_artifact",
        "intend_launch",
        "record_launched",
        "record_launch_failed",
        "record_reuse",
        "record_lease_use",
        "note_lease",
        "intend_release",
        "record_released",
        "watch",
        "take_poller",
        "finish_round",
        "release_poller",
        "advance_due",
        "record_site_facts",
        "record_site",
        "slot_enqueue",
        "slot_try",
        "slot_bind",
        "slot_release",
        "claim_evaluation",
    }
)

#: The commit modules: the one door.
COMMIT_MODULES = frozenset({"core.py", "records.py"})

#: The shared status round's coordination among processes (see above), by file.
POLL_PROTOCOL: dict[str, frozenset[str]] = {
    "shared_poll.py": frozenset({"advance_due", "release_poller", "take_poller", "watch"}),
}


def _writes(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    return {
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in WRITES
    }


def test_engine_code_writes_the_journal_only_through_its_commit_modules() -> None:
    found = {
        path.name: _writes(path)
        for path in sorted(ENGINE.glob("*.py"))
        if path.name not in COMMIT_MODULES
    }
    outside = {
        name: sorted(writes - POLL_PROTOCOL.get(name, frozenset()))
        for name, writes in found.items()
        if writes - POLL_PROTOCOL.get(name, frozenset())
    }
    assert not outside, f"journal writes outside the commit modules: {outside}"
    stale = {
        name: sorted(allowed - found.get(name, set()))
        for name, allowed in POLL_PROTOCOL.items()
        if allowed - found.get(name, set())
    }
    assert not stale, f"listed as the round's protocol, but no longer written there: {stale}"


def test_the_commit_modules_write_the_journal() -> None:
    assert "commit_transition" in _writes(ENGINE / "core.py")
    assert {
        "record_attempt_detail",
        "mark_unreachable",
        "commit_spool_offset",
        "record_artifact",
        "intend_launch",
        "record_launched",
        "intend_release",
        "record_released",
        "finish_round",
        "record_site_facts",
    } <= _writes(ENGINE / "records.py")
