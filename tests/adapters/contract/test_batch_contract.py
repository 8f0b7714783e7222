"""The adapter contract (suite.py) against the test-only batch scheduler written on the batch
base (tests/fakebatch). Its late submission: a `freeze` file makes the next submit command
freeze (the submitter times out), a `release` file lets the job start."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.adapters.contract.suite import (
    System,
    check_cancel,
    check_crash_then_reconcile,
    check_failure,
    check_late_submission_is_fenced,
    check_success,
)
from tests.fakebatch.adapter import QSYS_ENTRY, QsysBackend, QsysRequest
from tests.helpers.failpoints import RUN_FAILPOINTS
from vibesys.adapters.registry import ADAPTERS, register


@pytest.fixture(autouse=True, scope="module")
def qsys_registered() -> Iterator[None]:
    """The test-only scheduler is an adapter while these tests run, and only then."""
    register(QSYS_ENTRY)
    yield
    del ADAPTERS[QSYS_ENTRY.name]


def qsys_system(root: Path, timeout: float = 30.0) -> System:
    state = root / "qsys"

    def submitted(name: str) -> int:
        jobs = [json.loads(p.read_text()) for p in state.glob("*.json")]
        return sum(1 for job in jobs if job["name"] == name)

    @contextlib.contextmanager
    def late_submission() -> Iterator[None]:
        state.mkdir(exist_ok=True)
        (state / "freeze").touch()
        yield
        (state / "release").touch()

    backend = QsysBackend(state, timeout=timeout)
    request = QsysRequest(state=str(state))
    return System("qsys", backend, request, submitted, root, state / "runs", late_submission)


def test_success_and_its_logs(tmp_path: Path) -> None:
    check_success(qsys_system(tmp_path))


def test_failure_keeps_its_exit_code(tmp_path: Path) -> None:
    check_failure(qsys_system(tmp_path))


def test_cancel(tmp_path: Path) -> None:
    check_cancel(qsys_system(tmp_path))


@pytest.mark.parametrize("point", RUN_FAILPOINTS)
def test_crash_at_failpoint_then_reconcile_runs_exactly_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    check_crash_then_reconcile(qsys_system(tmp_path), monkeypatch, point)


def test_a_submission_accepted_after_its_fence_never_runs(tmp_path: Path) -> None:
    check_late_submission_is_fenced(qsys_system(tmp_path, timeout=2.0))
