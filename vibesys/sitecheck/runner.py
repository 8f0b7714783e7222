"""Running checks in order, each within its own time budget.

A check is a function returning what it found (`Found`). It runs on a worker thread that is
waited for at most its budget: a frozen sshd or slurmctld cannot hang the whole check (the
commands a check runs have time limits of their own; the budget is the backstop for anything
that ignores one). A check whose prerequisite failed is skipped and names that prerequisite,
so one unreachable controller costs one time limit, not one per check.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from msgspec import Struct

from vibesys.errors import BackendError, VibesysError
from vibesys.sitecheck.model import CheckRow, Status

__all__ = ["Check", "Found", "fail", "ok", "run_checks", "skipped", "warn"]


class Found(Struct, frozen=True):
    """What one check found."""

    status: Status
    detail: str
    fix: str = ""


def ok(detail: str) -> Found:
    return Found(Status.OK, detail)


def warn(detail: str, fix: str) -> Found:
    return Found(Status.WARN, detail, fix)


def fail(detail: str, fix: str) -> Found:
    return Found(Status.FAIL, detail, fix)


def skipped(detail: str, fix: str = "") -> Found:
    return Found(Status.SKIPPED, detail, fix)


class Check(Struct, frozen=True):
    name: str
    run: Callable[[], Found]
    #: the checks that must not have failed for this one to mean anything
    needs: tuple[str, ...] = ()
    #: seconds the check may take before it is reported as not answering
    budget: float = 30.0
    #: what to do when the check cannot run at all (an error of its own, or no answer)
    fix: str = "see the detail"


def run_checks(
    checks: Sequence[Check], *, clock: Callable[[], float] = time.monotonic
) -> tuple[CheckRow, ...]:
    rows: dict[str, CheckRow] = {}
    for check in checks:
        blocked = [rows[name] for name in check.needs if name in rows and _blocks(rows[name])]
        started = clock()
        if blocked:
            need = blocked[0]
            how = "failed" if need.status is Status.FAIL else "was skipped"
            found = skipped(f"needs {need.name}, which {how}", f"repair {need.name} first")
        else:
            found = _run_one(check)
        rows[check.name] = CheckRow(
            check.name, found.status, found.detail, found.fix, seconds=clock() - started
        )
    return tuple(rows.values())


def _blocks(row: CheckRow) -> bool:
    """A failed check blocks the ones that need it; so does one skipped for that reason (it
    carries a fix), but not one skipped because it does not apply."""
    return row.status is Status.FAIL or (row.status is Status.SKIPPED and bool(row.fix))


def _run_one(check: Check) -> Found:
    result: list[Found] = []

    def work() -> None:
        result.append(_guarded(check))

    worker = threading.Thread(target=work, name=f"vibesys-check-{check.name}", daemon=True)
    worker.start()
    worker.join(check.budget)
    if result:
        return result[0]
    # The thread is left behind (a daemon); the site's connection is closed at the end, which
    # ends whatever it still waits for.
    return fail(f"no answer within {check.budget:g} s", check.fix)


def _guarded(check: Check) -> Found:
    try:
        return check.run()
    except BackendError as exc:
        return fail(_one_line(str(exc)), exc.fix or check.fix)
    except VibesysError as exc:
        return fail(_one_line(str(exc)), check.fix)
    except Exception as exc:  # a check's own bug must still end as one row, with its name
        return fail(f"the check itself failed: {type(exc).__name__}: {exc}", check.fix)


def _one_line(text: str) -> str:
    return " ".join(text.split())
