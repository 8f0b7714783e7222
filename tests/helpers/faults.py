"""In-process crashes at named failpoints: `os._exit` becomes an exception the test catches,
so the FakeBackend (the remote world) survives the "crash" and a fresh Engine can reconcile."""

from __future__ import annotations

import pytest

from vibesys.engine import failpoints


class Crash(BaseException):
    """The process would have exited here."""


def crash_at(monkeypatch: pytest.MonkeyPatch, point: str) -> None:
    monkeypatch.setenv(failpoints.ENV, point)

    def exit_now(status: int) -> None:
        raise Crash(status)

    monkeypatch.setattr(failpoints.os, "_exit", exit_now)


def recover(monkeypatch: pytest.MonkeyPatch) -> None:
    """Disarm the failpoints: the next process starts clean."""
    monkeypatch.delenv(failpoints.ENV)
