"""open_journal refuses what is not a journal, a newer schema and network file systems,
and in every refused case leaves the file exactly as it was."""

from __future__ import annotations

import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from vibesys.errors import JournalOnNetworkFS, JournalTooNew, NotAJournal, UsageError
from vibesys.journal_schema import open_journal
from vibesys.journal_schema import opening as store_module

Snapshot = tuple[bytes, list[str]]


def snapshot(path: Path) -> Snapshot:
    """The file's bytes and what sits next to it."""
    return path.read_bytes(), sorted(p.name for p in path.parent.iterdir())


def sqlite_file(path: Path, *statements: str) -> Path:
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()
    return path


def _too_new(journal_file: Path) -> Path:
    open_journal(journal_file).close()
    return sqlite_file(
        journal_file,
        "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
        "VALUES ('vibesys', 'm999_from_the_future', '2031-01-01')",
    )


@pytest.mark.parametrize("readonly", [False, True])
def test_a_text_file_is_not_a_journal(tmp_path: Path, readonly: bool) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("dear diary,\n" * 200)
    before = snapshot(path)
    with pytest.raises(NotAJournal, match="not a vibesys journal"):
        open_journal(path, readonly=readonly)
    assert snapshot(path) == before


@pytest.mark.parametrize("readonly", [False, True])
def test_a_foreign_sqlite_database_is_refused(tmp_path: Path, readonly: bool) -> None:
    path = sqlite_file(
        tmp_path / "app.db",
        "CREATE TABLE people (name TEXT)",
        "INSERT INTO people VALUES ('ada')",
    )
    before = snapshot(path)
    with pytest.raises(NotAJournal, match="not a vibesys journal"):
        open_journal(path, readonly=readonly)
    assert snapshot(path) == before


def test_another_sqlite_utils_app_is_refused(tmp_path: Path) -> None:
    # Its own migrations table, other migration set: still not ours.
    path = sqlite_file(
        tmp_path / "other.db",
        "CREATE TABLE _sqlite_migrations (id INTEGER PRIMARY KEY, migration_set TEXT, "
        "name TEXT, applied_at TEXT)",
        "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
        "VALUES ('otherapp', 'm001_init', 'x')",
        "CREATE TABLE invocations (id TEXT)",
    )
    before = snapshot(path)
    with pytest.raises(NotAJournal):
        open_journal(path)
    assert snapshot(path) == before


def test_a_journal_from_a_newer_schema_is_refused(journal_file: Path) -> None:
    _too_new(journal_file)
    before = snapshot(journal_file)
    with pytest.raises(JournalTooNew, match="m999_from_the_future"):
        open_journal(journal_file)
    assert snapshot(journal_file) == before


def test_a_journal_from_a_newer_schema_is_refused_readonly(journal_file: Path) -> None:
    _too_new(journal_file)
    before = journal_file.read_bytes()
    with pytest.raises(JournalTooNew, match="m999_from_the_future"):
        open_journal(journal_file, readonly=True)
    assert journal_file.read_bytes() == before
    # A read-only reader of a WAL file may leave the (empty) -wal and -shm behind; it must not
    # have logged anything.
    wal = journal_file.with_name(journal_file.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0


def test_a_readonly_open_of_a_missing_path_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "journal.db"
    with pytest.raises(UsageError, match="no journal"):
        open_journal(path, readonly=True)
    assert list(tmp_path.iterdir()) == []


def test_a_readonly_open_of_an_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    with pytest.raises(NotAJournal, match="empty database"):
        open_journal(path, readonly=True)
    assert path.read_bytes() == b""


def test_a_directory_is_not_a_journal(tmp_path: Path) -> None:
    with pytest.raises(NotAJournal, match="directory"):
        open_journal(tmp_path)


def test_a_missing_directory_is_created(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "journal.db"
    open_journal(path).close()
    assert path.is_file()


@pytest.fixture
def network_under(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Pretend `tmp_path/nfs` is an NFS mount and everything else a local disk."""
    mount = tmp_path / "nfs"
    mount.mkdir()

    def fake_type(directory: Path) -> str:
        inside = directory.resolve() == mount or mount in directory.resolve().parents
        return "nfs4" if inside else "ext4"

    monkeypatch.setattr(store_module, "filesystem_type", fake_type)
    yield mount


def test_a_journal_on_nfs_is_refused(network_under: Path) -> None:
    with pytest.raises(JournalOnNetworkFS, match="nfs4"):
        open_journal(network_under / "journal.db")
    assert list(network_under.iterdir()) == []


def test_a_journal_in_a_new_directory_on_nfs_is_refused(network_under: Path) -> None:
    # The directory does not exist yet: the check must look at where it would be created.
    with pytest.raises(JournalOnNetworkFS, match="nfs4"):
        open_journal(network_under / "new" / "journal.db")
    assert list(network_under.iterdir()) == []


def test_every_network_fs_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for fs_type in sorted(store_module.NETWORK_FS):
        monkeypatch.setattr(store_module, "filesystem_type", lambda _d, t=fs_type: t)
        with pytest.raises(JournalOnNetworkFS, match=fs_type):
            open_journal(tmp_path / "sub" / "journal.db")
        assert list(tmp_path.iterdir()) == []


def test_a_local_disk_is_fine(network_under: Path, tmp_path: Path) -> None:
    open_journal(tmp_path / "local" / "journal.db").close()
    assert (tmp_path / "local" / "journal.db").is_file()


MOUNTS = """\
sysfs /sys sysfs rw 0 0
/dev/sda1 / ext4 rw 0 0
server:/export /mnt/nfs nfs4 rw 0 0
/dev/sdb1 /mnt/nfs/scratch xfs rw 0 0
/dev/sdc1 /mnt/my\\040disk btrfs rw 0 0
"""


@pytest.mark.parametrize(
    ("directory", "fs_type"),
    [
        ("/mnt/nfs", "nfs4"),
        ("/mnt/nfs/project/run", "nfs4"),
        ("/mnt/nfs/scratch/run", "xfs"),  # the longest mount point wins
        ("/mnt/nfsother", "ext4"),  # a prefix of the name is not a parent directory
        ("/mnt/my disk/x", "btrfs"),  # \040 is a space in /proc/mounts
        ("/home/me", "ext4"),
    ],
)
def test_filesystem_type_reads_proc_mounts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, directory: str, fs_type: str
) -> None:
    fake = tmp_path / "mounts"
    fake.write_text(MOUNTS)
    real_open = open

    def fake_open(file: str, *args: object, **kwargs: object) -> object:
        assert file == "/proc/mounts"
        return real_open(fake, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(store_module, "open", fake_open, raising=False)
    assert store_module.filesystem_type(Path(directory)) == fs_type


@pytest.mark.parametrize("where", ["tmp", "/proc/self", "/"])
def test_filesystem_type_of_a_real_directory_agrees_with_findmnt(
    tmp_path: Path, where: str
) -> None:
    directory = tmp_path if where == "tmp" else Path(where)
    # util-linux's findmnt reads the mount table on its own: an oracle independent of ours.
    findmnt = subprocess.run(
        ["findmnt", "-n", "-o", "FSTYPE", "--target", str(directory.resolve())],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    assert store_module.filesystem_type(directory) == findmnt.stdout.strip()
