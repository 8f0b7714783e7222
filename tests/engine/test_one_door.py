"""Every journal write by engine code goes through the engine's commit modules: `core.py`, the
commit of a planned transition, and `records.py`, the recorded result of an
observation. A write anywhere else in
`vibesys/engine/` fails here, unless it is one of the writes listed below that have not moved
yet; an entry no longer used fails too, so the list only shrinks."""

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

#: Writes still made outside the commit modules, by file: owner leases, a collection's
#: progress, the shared status round and a cluster lease's own rows, each written where its
#: effect runs. They move behind the commit once the planner asks for them as effects.
NOT_MOVED_YET: dict[str, frozenset[str]] = {
    "shared_poll.py": frozenset(
        {
            "advance_due",
            "finish_round",
            "record_site_facts",
            "release_poller",
            "take_poller",
            "watch",
        }
    ),
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
        name: sorted(writes - NOT_MOVED_YET.get(name, frozenset()))
        for name, writes in found.items()
        if writes - NOT_MOVED_YET.get(name, frozenset())
    }
    assert not outside, f"journal writes outside the commit modules: {outside}"
    stale = {
        name: sorted(allowed - found.get(name, set()))
        for name, allowed in NOT_MOVED_YET.items()
        if allowed - found.get(name, set())
    }
    assert not stale, f"listed as not moved yet, but no longer written there: {stale}"


def test_the_commit_module_writes_the_journal() -> None:
    assert "commit_transition" in _writes(ENGINE / "core.py")
    assert {"record_attempt_detail", "mark_unreachable"} <= _writes(ENGINE / "records.py")
