"""Running checks: one time budget each, skipping what needs a failed check, errors as rows."""

from __future__ import annotations

import threading
import time

from vibesys.errors import BackendMisconfigured, BackendUnavailable, ConfigError
from vibesys.sitecheck import Status
from vibesys.sitecheck.runner import Check, Found, fail, ok, run_checks, skipped


def test_a_check_that_does_not_answer_fails_within_its_budget() -> None:
    release = threading.Event()

    def frozen() -> Found:
        release.wait(4)  # past its budget; short, so a mutant without the limit ends soon
        return ok("too late")

    started = time.monotonic()
    try:
        rows = run_checks(
            [
                Check("transport", frozen, budget=0.3, fix="check that sshd answers"),
                Check("squeue", lambda: ok("answers"), ("transport",)),
                Check("certificate", lambda: ok("none")),
            ]
        )
    finally:
        release.set()
    assert time.monotonic() - started < 3
    assert [(r.name, r.status, r.detail, r.fix) for r in rows] == [
        ("transport", Status.FAIL, "no answer within 0.3 s", "check that sshd answers"),
        ("squeue", Status.SKIPPED, "needs transport, which failed", "repair transport first"),
        ("certificate", Status.OK, "none", ""),
    ]


def test_a_skip_for_a_failure_propagates_but_a_skip_that_does_not_apply_does_not() -> None:
    ran: list[str] = []

    def mark(name: str) -> Found:
        ran.append(name)
        return ok(name)

    rows = run_checks(
        [
            Check("squeue", lambda: fail("down", "start it")),
            Check("sbatch", lambda: mark("sbatch"), ("squeue",)),
            Check("compute-node", lambda: mark("compute-node"), ("sbatch",)),
            Check("gpu", lambda: skipped("GPU commands are off")),
            Check("after-gpu", lambda: mark("after-gpu"), ("gpu",)),
        ]
    )
    assert ran == ["after-gpu"]
    assert [(r.status, r.detail) for r in rows[1:3]] == [
        (Status.SKIPPED, "needs squeue, which failed"),
        (Status.SKIPPED, "needs sbatch, which was skipped"),
    ]


def test_errors_become_rows_with_their_own_fix_or_the_checks() -> None:
    def misconfigured() -> Found:
        raise BackendMisconfigured("host key changed", fix="verify the new key")

    def unavailable() -> Found:
        raise BackendUnavailable("no answer", evidence="ssh x: no answer after 3 s")

    def config() -> Found:
        raise ConfigError("no Host x in ~/.slurm/config")

    def bug() -> Found:
        raise KeyError("oops")

    rows = run_checks(
        [
            Check("a", misconfigured, fix="default"),
            Check("b", unavailable, fix="default"),
            Check("c", config, fix="add the Host"),
            Check("d", bug, fix="report it"),
        ]
    )
    assert [(r.status, r.detail, r.fix) for r in rows] == [
        (Status.FAIL, "host key changed", "verify the new key"),
        (Status.FAIL, "no answer", "default"),
        (Status.FAIL, "no Host x in ~/.slurm/config", "add the Host"),
        (Status.FAIL, "the check itself failed: KeyError: 'oops'", "report it"),
    ]
