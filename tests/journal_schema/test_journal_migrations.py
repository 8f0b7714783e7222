"""The schema: migrations against a golden schema.sql, the pragmas, and the append-only history."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from sqlite_utils import Database

from tests.helpers.golden_files import assert_matches_golden
from tests.helpers.journal import NewInvocation
from vibesys.journal_schema import Journal, open_journal
from vibesys.journal_schema.migrations import KNOWN, MIGRATION_SET, migrations

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "schema.sql"


def test_a_fresh_journal_has_exactly_the_golden_schema(journal: Journal) -> None:
    # Released migration steps must never change: regenerate only for a new step.
    assert_matches_golden(GOLDEN, Database(journal.conn).schema.strip() + "\n")


def test_the_golden_schema_pins_the_contract() -> None:
    # Guards against a regenerated golden file that lost what the issue requires.
    text = GOLDEN.read_text(encoding="utf-8")
    for needle in (
        'CREATE TABLE "invocations"',
        'CREATE TABLE "attempts"',
        'CREATE TABLE "history"',
        'PRIMARY KEY ("invocation_id", "seq")',
        # m005: one b-tree per append (WITHOUT ROWID), the active invocations indexed apart
        ") WITHOUT ROWID",
        'CREATE INDEX "invocations_active" ON "invocations" ("created_at", "id") '
        "WHERE outcome IS NULL",
        'CREATE TABLE "poll_sites"',
        'CREATE TABLE "poll_watch"',
        "CREATE TRIGGER history_no_update BEFORE UPDATE ON history",
        "CREATE TRIGGER history_no_delete BEFORE DELETE ON history",
        '"version" INTEGER NOT NULL',
        '"evidence" TEXT NOT NULL',
        # m006: the settings recorded at PREPARED, the attempt's first unreachable observation
        '"settings" TEXT',
        '"unreachable_since" TEXT',
    ):
        assert needle in text, needle


PRAGMAS = {"journal_mode": "wal", "synchronous": 2, "foreign_keys": 1, "busy_timeout": 30000}


def _pragmas(journal: Journal) -> dict[str, object]:
    return {name: journal.conn.execute(f"PRAGMA {name}").fetchone()[0] for name in PRAGMAS}


def test_pragmas_of_a_fresh_journal(journal: Journal) -> None:
    assert _pragmas(journal) == PRAGMAS
    assert journal.conn.isolation_level is None, "transactions are explicit (BEGIN IMMEDIATE)"


def test_pragmas_after_reopening(journal: Journal, journal_file: Path) -> None:
    journal.close()
    again = open_journal(journal_file)
    try:
        assert _pragmas(again) == PRAGMAS
    finally:
        again.close()
    readonly = open_journal(journal_file, readonly=True)
    try:
        assert _pragmas(readonly) == PRAGMAS  # WAL is a property of the file
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            readonly.conn.execute("DELETE FROM invocations")
    finally:
        readonly.close()


def test_every_known_step_is_recorded_once(journal: Journal) -> None:
    rows = journal.conn.execute(
        "SELECT migration_set, name FROM _sqlite_migrations ORDER BY id"
    ).fetchall()
    assert rows == [(MIGRATION_SET, m.name) for m in migrations._migrations]
    assert {name for _, name in rows} == KNOWN
    assert migrations.pending(Database(journal.conn)) == []


def test_reopening_changes_nothing(
    journal: Journal, journal_file: Path, new_invocation: NewInvocation
) -> None:
    new_invocation("inv-keep")
    schema = Database(journal.conn).schema
    journal.close()
    for _ in range(2):
        again = open_journal(journal_file)
        try:
            assert Database(again.conn).schema == schema
            assert again.conn.execute("SELECT count(*) FROM _sqlite_migrations").fetchone() == (
                len(KNOWN),
            )
            assert again.invocations.all_ids() == ["inv-keep"]
        finally:
            again.close()


def test_history_refuses_update_and_delete(journal: Journal, new_invocation: NewInvocation) -> None:
    from vibesys.states import SubmitIntended

    journal.commit_transition(new_invocation("inv-ao"), SubmitIntended(1, "vibesys-inv-ao-1"))
    before = journal.invocations.raw_history("inv-ao")
    assert len(before) == 1
    with pytest.raises(sqlite3.IntegrityError, match="history is append-only"):
        journal.conn.execute("UPDATE history SET to_state='DONE' WHERE invocation_id='inv-ao'")
    with pytest.raises(sqlite3.IntegrityError, match="history is append-only"):
        journal.conn.execute("DELETE FROM history WHERE invocation_id='inv-ao'")
    with pytest.raises(sqlite3.IntegrityError, match="history is append-only"):
        journal.conn.execute("DELETE FROM history")
    assert journal.invocations.raw_history("inv-ao") == before


def test_foreign_keys_are_enforced(journal: Journal) -> None:
    with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
        journal.conn.execute(
            "INSERT INTO history (invocation_id, seq, from_state, to_state, event, evidence, at)"
            " VALUES ('nobody', 1, 'PREPARED', 'SUBMITTING', 'SubmitIntended', '{}', 'now')"
        )
    with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
        journal.conn.execute(
            "INSERT INTO attempts (invocation_id, attempt, job_name, intended_at)"
            " VALUES ('nobody', 1, 'vibesys-nobody-1', 'now')"
        )


def test_m003_turns_options_into_typed_requests(tmp_path: Path) -> None:
    """A journal written before typed requests keeps working: each invocation's options
    become its adapter's request (the digest, once stored twice, lives in the request), and
    attempts recorded then count as dispatched (they may have been submitted)."""
    import json

    from sqlite_utils import Database

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    old = Database(conn)
    migrations.apply(old, stop_before="m003_typed_requests_fences_context")
    options = {
        "site_config": "/etc/slurm.toml",
        "gpus": 2,
        "time_minutes": 30,
        "partitions": ["main"],
        "artifacts": ["out/*.json"],
        "candidate": "/work/cand",
        "snapshot_exclude": ["*.ckpt"],
        "snapshot_digest": "d1g35t",
        "dependency": "581",
        "after": "parent123",
    }
    old["invocations"].insert(
        {
            "id": "old1",
            "adapter": "sbatch",
            "command": '["python", "eval.py"]',
            "options": json.dumps(options),
            "state": "SUBMITTING",
            "version": 1,
            "attempt": 1,
            "max_retries": 2,
            "run_dir": "/runs/old1",
            "created_at": "2026-01-01T00:00:00+00:00",
            "updated_at": "2026-01-01T00:00:00+00:00",
            "snapshot_digest": "d1g35t",
        }
    )
    old["attempts"].insert(
        {
            "invocation_id": "old1",
            "attempt": 1,
            "job_name": "vibesys-old1-1",
            "intended_at": "2026-01-01T00:00:01+00:00",
        }
    )
    conn.close()
    journal = open_journal(path)
    try:
        inv = journal.invocations.get("old1")
        assert inv.recorded_request == {
            "site_config": "/etc/slurm.toml",
            "gpus": 2,
            "time_minutes": 30,
            "partitions": ["main"],
            "artifacts": ["out/*.json"],
            "candidate": {"path": "/work/cand", "exclude": ["*.ckpt"], "digest": "d1g35t"},
            "after": {"job_id": "581", "invocation": "parent123"},
        }
        assert inv.snapshot_digest == "d1g35t"
        assert inv.dispatched is True, "an old intent may have been submitted"
        assert (inv.cwd, inv.env_file) == (None, None)
        columns = {c.name for c in Database(journal.conn)["invocations"].columns}
        assert not {"options", "snapshot_digest"} & columns
    finally:
        journal.close()


def _old_row(
    invocation_id: str, adapter: str, command: str, request: str, **more: object
) -> dict[str, object]:
    """An invocation row as a journal before m012 held it (`run_dir`, a running attempt)."""
    return {
        "id": invocation_id,
        "adapter": adapter,
        "command": command,
        "request": request,
        "request_version": 1,
        "state": "RUNNING",
        "version": 3,
        "attempt": 1,
        "max_retries": 0,
        "run_dir": f"/runs/{invocation_id}",
        "created_at": "2026-01-01T00:00:00+00:00",
        "updated_at": "2026-01-01T00:00:00+00:00",
        **more,
    }


def test_m006_records_settings_and_moves_cancel_when_orphaned_out_of_the_request(
    tmp_path: Path,
) -> None:
    """Older invocations are carried on with what every process but their driver used (the
    driver's own values were never recorded); a broker job's cancel-when-orphaned moves from
    its request to its settings, so its request still parses."""
    import json

    from sqlite_utils import Database

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    old = Database(conn)
    migrations.apply(old, stop_before="m006_settings_unreachable_since")
    for invocation_id, orphaned in (("broker1", True), ("plain1", None)):
        request = {"site_config": "/etc/slurm.toml", "gpus": 1, "time_minutes": 5}
        if orphaned is not None:
            request["cancel_when_orphaned"] = orphaned
        old["invocations"].insert(
            _old_row(invocation_id, "srun", '["nvidia-smi"]', json.dumps(request))
        )
    conn.close()
    journal = open_journal(path)
    try:
        broker, plain = journal.invocations.get("broker1"), journal.invocations.get("plain1")
        assert broker.settings.cancel_when_orphaned and not plain.settings.cancel_when_orphaned
        assert "cancel_when_orphaned" not in broker.recorded_request
        assert broker.recorded_request == {
            "site_config": "/etc/slurm.toml",
            "gpus": 1,
            "time_minutes": 5,
        }
        assert plain.settings.unreachable_timeout_seconds == 600.0
        assert plain.settings.retry_delay_seconds == 2.0
    finally:
        journal.close()


def test_m012_keeps_each_invocations_directory_under_its_new_name(tmp_path: Path) -> None:
    """A journal written before m012 names the invocation's directory `run_dir`: once opened,
    the column is `invocation_dir` and every invocation keeps its directory (and its logs are
    found where they were)."""

    from sqlite_utils import Database

    from vibesys.journal_schema.settings import Settings
    from vibesys.osutil.layout import attempt_dir

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    old = Database(conn)
    migrations.apply(old, stop_before="m012_invocation_dir")
    for invocation_id in ("old1", "old2"):
        old["invocations"].insert(
            _old_row(invocation_id, "local", '["true"]', "{}", settings=Settings().dumps())
        )
    conn.close()
    journal = open_journal(path)
    try:
        assert [journal.invocations.get(i).invocation_dir for i in ("old1", "old2")] == [
            "/runs/old1",
            "/runs/old2",
        ]
        assert attempt_dir(journal.invocations.get("old1").invocation_dir, 1) == Path(
            "/runs/old1/1"
        )
        columns = {c.name for c in Database(journal.conn)["invocations"].columns}
        assert "invocation_dir" in columns and "run_dir" not in columns
        assert Database(journal.conn).schema == _fresh_schema(tmp_path / "fresh.db")
    finally:
        journal.close()


def _fresh_schema(path: Path) -> str:
    fresh = open_journal(path)
    try:
        return str(Database(fresh.conn).schema)
    finally:
        fresh.close()


def test_opening_a_current_journal_for_writing_needs_no_sqlite_utils(
    journal: Journal, journal_file: Path
) -> None:
    # Every step is applied: nothing to migrate, so `vibesys run` need not import sqlite-utils.
    journal.close()
    code = (
        "import sys; from pathlib import Path; "
        "from vibesys.journal_schema.store import open_journal; "
        f"j = open_journal(Path({str(journal_file)!r})); "
        "print(sorted(m for m in sys.modules if m.startswith('sqlite_utils')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
