"""The row model of `vibesys check`: validation, the JSON shape, the text, the exit statuses.
Oracles are written out here, never read from the constants they check."""

from __future__ import annotations

import pytest

from vibesys.sitecheck import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    CheckReport,
    CheckRow,
    Status,
    render_text,
)

OK = CheckRow("transport", Status.OK, "local: `bash -c` runs commands on this host", seconds=0.0123)
WARN = CheckRow("certificate", Status.WARN, "expires soon", "renew it", seconds=0.5)
FAIL = CheckRow("squeue", Status.FAIL, "no answer within 3 s", "start slurmctld", seconds=3.0)
SKIP = CheckRow("sbatch", Status.SKIPPED, "needs squeue, which failed", "repair squeue first")
NA = CheckRow("bwrap", Status.SKIPPED, "GPU commands are off")


def report(*rows: CheckRow) -> CheckReport:
    return CheckReport("slurm", "local", "slurm.toml", rows)


def test_the_exit_statuses_are_documented_values() -> None:
    assert (EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT) == (0, 1, 2)
    assert report(OK, WARN, NA).exit_status == 0
    assert report(OK, FAIL, SKIP).exit_status == 1
    assert report().exit_status == 0


def test_overall_is_the_worst_that_counts() -> None:
    assert report(OK, NA).overall is Status.OK
    assert report(OK, WARN, NA).overall is Status.WARN
    assert report(WARN, FAIL, SKIP).overall is Status.FAIL
    assert report(OK, FAIL, SKIP).failed == (FAIL,)
    assert report(OK, WARN).warnings == (WARN,)
    assert report(OK, WARN).ok and not report(FAIL).ok


@pytest.mark.parametrize("status", [Status.WARN, Status.FAIL])
def test_a_row_that_is_not_ok_must_say_what_to_do(status: Status) -> None:
    with pytest.raises(ValueError, match="must say what to do"):
        CheckRow("sacct", status, "slurmdbd does not answer")


def test_a_name_is_one_word() -> None:
    with pytest.raises(ValueError, match="one word"):
        CheckRow("work space", Status.OK, "x")
    with pytest.raises(ValueError, match="one word"):
        CheckRow("", Status.OK, "x")


def test_the_json_shape() -> None:
    assert report(OK, FAIL, NA).to_json() == {
        "kind": "slurm",
        "site": "local",
        "source": "slurm.toml",
        "overall": "fail",
        "rows": [
            {
                "name": "transport",
                "status": "ok",
                "detail": "local: `bash -c` runs commands on this host",
                "fix": None,
                "seconds": 0.012,
            },
            {
                "name": "squeue",
                "status": "fail",
                "detail": "no answer within 3 s",
                "fix": "start slurmctld",
                "seconds": 3.0,
            },
            {
                "name": "bwrap",
                "status": "skipped",
                "detail": "GPU commands are off",
                "fix": None,
                "seconds": 0.0,
            },
        ],
    }


def test_the_text_puts_each_fix_under_its_row() -> None:
    assert render_text(report(OK, WARN, FAIL, SKIP, NA)) == (
        "slurm site local (slurm.toml)\n"
        "  ok       transport    local: `bash -c` runs commands on this host\n"
        "  warn     certificate  expires soon\n"
        "                        fix: renew it\n"
        "  fail     squeue       no answer within 3 s\n"
        "                        fix: start slurmctld\n"
        "  skipped  sbatch       needs squeue, which failed\n"
        "  skipped  bwrap        GPU commands are off\n"
        "overall: fail (1 ok, 1 warn, 1 fail, 2 skipped)\n"
    )


def test_the_failure_summary_names_the_first_failed_check() -> None:
    other = CheckRow("sacct", Status.FAIL, "slurmdbd is down", "start slurmdbd")
    assert report(OK, FAIL, other).failure_summary() == (
        "site check squeue failed (and 1 more): no answer within 3 s; fix: start slurmctld"
    )
    assert report(OK, WARN).failure_summary() == ""
    assert report(OK, FAIL).row("squeue") is FAIL
    with pytest.raises(KeyError):
        report(OK).row("nope")
