"""The proctrack row of the Slurm site check: read from the same `scontrol show config` as the
rpc-limits row (one query), ok for proctrack/cgroup, a warning with the fix otherwise."""

from __future__ import annotations

import pytest

from tests.sitecheck.test_slurm_pieces import ScriptedSite, site
from vibesys.config.load import parse_slurm_config
from vibesys.sitecheck import CheckOptions, SlurmSite
from vibesys.sitecheck.runner import run_checks
from vibesys.sitecheck.slurm import SlurmChecks

#: `scontrol show config` as Slurm prints it, cut to a few lines.
SHOW_CONFIG = """Configuration data as of 2026-12-06T10:00:00
MinJobAge               = 300 sec
PrologFlags             = Alloc,Contain
ProctrackType           = {tracking}
SlurmctldParameters     = (null)
TaskPlugin              = task/affinity,task/cgroup
"""

FIX = (
    "set ProctrackType=proctrack/cgroup in slurm.conf (with cgroup.conf) and restart "
    "slurmctld and every slurmd"
)


def rows(runner: ScriptedSite) -> dict[str, tuple[str, str, str]]:
    checks = SlurmChecks(
        SlurmSite(parse_slurm_config(site()), "slurm.toml"), CheckOptions(), runner=runner
    )
    wanted = [c for c in checks.checks() if c.name in ("squeue", "rpc-limits", "proctrack")]
    return {row.name: (str(row.status), row.detail, row.fix) for row in run_checks(wanted)}


def test_cgroup_tracking_passes_from_the_one_show_config() -> None:
    runner = ScriptedSite(scontrol=(0, SHOW_CONFIG.format(tracking="proctrack/cgroup"), ""))
    found = rows(runner)
    assert found["proctrack"] == (
        "ok",
        "ProctrackType=proctrack/cgroup: every process a job starts ends with it",
        "",
    )
    assert found["rpc-limits"][0] == "ok"
    assert [call[0] for call in runner.calls].count("scontrol") == 1, runner.calls


@pytest.mark.parametrize("tracking", ["proctrack/linuxproc", "proctrack/pgid"])
def test_other_tracking_warns_with_the_fix(tracking: str) -> None:
    found = rows(ScriptedSite(scontrol=(0, SHOW_CONFIG.format(tracking=tracking), "")))
    assert found["proctrack"] == (
        "warn",
        f"ProctrackType={tracking}: a process a job detaches (setsid, a daemon) can outlive it "
        "on the node, holding its GPUs, memory and ports",
        FIX,
    )


def test_no_tracking_reported_warns_and_a_failed_query_skips() -> None:
    found = rows(ScriptedSite(scontrol=(0, "Configuration data as of now\n", "")))
    assert found["proctrack"][0] == "warn" and "(not reported)" in found["proctrack"][1]
    found = rows(ScriptedSite(scontrol=(1, "", "slurm_load_ctl_conf error")))
    assert found["rpc-limits"][0] == "fail"
    assert found["proctrack"][:2] == ("skipped", "needs rpc-limits, which failed")
