"""The golden-file helper: compare, regenerate only on request and then fail, never under CI."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers.golden_files import UPDATE_VARIABLE, assert_matches_golden, regenerate_command

ROOT = Path(__file__).resolve().parent
Failed = pytest.fail.Exception


@pytest.fixture
def golden(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(UPDATE_VARIABLE, raising=False)
    monkeypatch.delenv("CI", raising=False)
    path = tmp_path / "case.txt"
    path.write_text("line one\nline two\n", encoding="utf-8")
    path.chmod(0o644)
    return path


def test_a_match_passes(golden: Path) -> None:
    assert_matches_golden(golden, "line one\nline two\n")


@pytest.mark.parametrize(
    "actual", ["line one\nline 2\n", "line one\nline two", "line one\r\nline two\n"]
)
def test_any_difference_fails_with_a_diff_and_the_command(golden: Path, actual: str) -> None:
    with pytest.raises(Failed) as caught:
        assert_matches_golden(golden, actual)
    message = str(caught.value)
    assert "--- case.txt (golden)" in message and "+++ case.txt (actual)" in message
    assert f"{UPDATE_VARIABLE}=1 .venv/bin/pytest" in message
    assert golden.read_text(encoding="utf-8") == "line one\nline two\n"


def test_a_missing_file_fails_and_is_not_created(tmp_path: Path, golden: Path) -> None:
    missing = tmp_path / "absent.txt"
    with pytest.raises(Failed, match="is missing"):
        assert_matches_golden(missing, "x\n")
    assert not missing.exists()


def test_the_command_reruns_the_current_test() -> None:
    assert regenerate_command() == (
        f"{UPDATE_VARIABLE}=1 .venv/bin/pytest "
        "'tests/test_golden_files.py::test_the_command_reruns_the_current_test'"
    )


def test_update_writes_the_file_and_still_fails(
    golden: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(UPDATE_VARIABLE, "1")
    with pytest.raises(Failed) as caught:
        assert_matches_golden(golden, "line one\nline 2\n")
    assert "wrote" in str(caught.value) and "+line 2" in str(caught.value)
    assert golden.read_text(encoding="utf-8") == "line one\nline 2\n"
    assert golden.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in golden.parent.iterdir()] == [golden.name]  # no temporary left
    # The next run, without the variable, passes against what was written.
    monkeypatch.delenv(UPDATE_VARIABLE)
    assert_matches_golden(golden, "line one\nline 2\n")


def test_update_of_a_missing_file_creates_it_and_fails(
    tmp_path: Path, golden: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(UPDATE_VARIABLE, "1")
    new = tmp_path / "new.txt"
    with pytest.raises(Failed, match="wrote"):
        assert_matches_golden(new, "fresh\n")
    assert new.read_text(encoding="utf-8") == "fresh\n"


def test_update_of_a_matching_file_passes_and_leaves_it_alone(
    golden: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(UPDATE_VARIABLE, "1")
    os.utime(golden, ns=(1_000_000_000, 1_000_000_000))
    assert_matches_golden(golden, "line one\nline two\n")
    assert golden.stat().st_mtime_ns == 1_000_000_000


@pytest.mark.parametrize("ci", ["true", "1"])
def test_update_is_refused_under_ci(golden: Path, monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    monkeypatch.setenv(UPDATE_VARIABLE, "1")
    monkeypatch.setenv("CI", ci)
    with pytest.raises(Failed, match="refusing to write"):
        assert_matches_golden(golden, "changed\n")
    assert golden.read_text(encoding="utf-8") == "line one\nline two\n"


def test_a_failed_write_leaves_the_old_file_whole(
    golden: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(UPDATE_VARIABLE, "1")

    def crash(src: object, dst: object) -> None:
        raise OSError("disk went away")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk went away"):
        assert_matches_golden(golden, "half\n")
    assert golden.read_text(encoding="utf-8") == "line one\nline two\n"
    assert [p.name for p in golden.parent.iterdir()] == [golden.name]


def test_every_golden_comparison_goes_through_the_helper() -> None:
    # Only the helper may read the update variable: a test of its own would bypass the rules.
    readers = [
        path.relative_to(ROOT).as_posix()
        for path in ROOT.rglob("*.py")
        if UPDATE_VARIABLE in path.read_text(encoding="utf-8")
        and path.name not in ("golden_files.py", "test_golden_files.py")
    ]
    assert readers == []
    users = {
        path.relative_to(ROOT).as_posix()
        for path in ROOT.rglob("test_*.py")
        if "assert_matches_golden(" in path.read_text(encoding="utf-8")
    }
    assert {
        "adapters/test_slurm_script.py",
        "journal_schema/test_journal_migrations.py",
    } <= users
