"""The sbatch adapter refuses a time no partition allows before anything is written or
submitted (sinfo asked once per backend), blames the request or the site's sbatch_arguments,
and reads sbatch's own refusal as the request's fault, never as an outage. The cluster is a
scripted runner: these need no Slurm (the live test is tests/slurm/test_resources_slurm.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from vibesys.adapters.base import JobContext, SubmitRequest
from vibesys.adapters.slurm import sbatch as sbatch_module
from vibesys.adapters.slurm.request import SbatchRequest, make_request
from vibesys.adapters.slurm.sbatch import SbatchBackend, prewarm
from vibesys.adapters.transports import CommandResult
from vibesys.errors import BackendMisconfigured, BackendUnavailable, SubmitRejected

SINFO = "main* 30:00\npriority 2:00:00\nshort 5:00\n"
REFUSED = (
    "sbatch: error: Batch job submission failed: Requested time limit is invalid "
    "(missing or exceeds some limit)\n"
)


class Cluster:
    """Answers sinfo (or fails it) and the submit command (sbatch's answer); keeps each argv."""

    def __init__(self, sinfo_rc: int = 0, sbatch: tuple[int, str, str] = (0, "22\n", "")) -> None:
        self.sinfo_rc = sinfo_rc
        self.sbatch = sbatch
        self.calls: list[list[str]] = []

    def run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float | None = None,
        maybe_effect: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        self.calls.append(list(argv))
        if argv[0] == "sinfo":
            said = SINFO if self.sinfo_rc == 0 else "slurm_load_partitions: Socket timed out"
            out, err = (said, "") if self.sinfo_rc == 0 else ("", said)
            return CommandResult(self.sinfo_rc, out, err, tuple(argv))
        code, out, err = self.sbatch
        return CommandResult(code, out, err, tuple(argv))

    def stream(
        self, argv: Sequence[str], sink: object, *, timeout: float | None = None
    ) -> CommandResult:
        raise AssertionError(f"nothing is streamed: {argv}")

    def submitted(self) -> int:
        return sum(1 for argv in self.calls if argv[:2] == ["sh", "-c"])

    def sinfos(self) -> int:
        return sum(1 for argv in self.calls if argv[0] == "sinfo")


def request(
    tmp_path: Path, sbatch_arguments: str = "", **values: object
) -> SubmitRequest[SbatchRequest]:
    config = tmp_path / "slurm.toml"
    config.write_text(
        f'[slurm]\nname = "t"\nremote_workspace_root = "{tmp_path / "remote"}"\n'
        f"sbatch_arguments = [{sbatch_arguments}]\n"
        '[slurm.transport]\nkind = "local"\n'
    )
    spec = make_request("sbatch", {"slurm_config": str(config), **values})
    assert isinstance(spec, SbatchRequest)
    attempt_dir = tmp_path / "local" / "inv" / "1"
    context = JobContext(str(tmp_path))
    return SubmitRequest("inv", 1, "vibesys-inv-1", ("true",), attempt_dir, context, spec)


def backend(req: SubmitRequest[SbatchRequest], cluster: Cluster) -> SbatchBackend:
    return SbatchBackend(req.spec.site(), runner=cluster)


def test_a_time_beyond_the_partition_is_refused_before_anything_is_submitted(
    tmp_path: Path,
) -> None:
    req = request(tmp_path, time_minutes=60, partition="main")
    cluster = Cluster()
    with pytest.raises(SubmitRejected) as refused:
        backend(req, cluster).submit(req)
    assert str(refused.value) == (
        "--time 60 exceeds partition main's MaxTime (30 min): nothing submitted"
    )
    assert not refused.value.retryable and not refused.value.maybe_submitted
    assert cluster.submitted() == 0 and not req.attempt_dir.exists(), "nothing written"


def test_the_default_partition_is_the_one_compared_and_a_fit_is_submitted(
    tmp_path: Path,
) -> None:
    cluster = Cluster()
    req = request(tmp_path, time_minutes=31)
    with pytest.raises(SubmitRejected, match=r"--time 31 exceeds partition main's MaxTime"):
        backend(req, cluster).submit(req)
    fits = request(tmp_path, time_minutes=60, partition="priority")
    sbatch = backend(fits, cluster)
    assert sbatch.submit(fits).job_id == "22"
    assert sbatch.submit(fits).job_id == "22"
    assert cluster.submitted() == 2
    # Once per backend (and once for the one refused above), not once per job.
    assert cluster.sinfos() == 2


def test_a_request_without_a_time_asks_no_sinfo(tmp_path: Path) -> None:
    cluster = Cluster()
    req = request(tmp_path)
    assert backend(req, cluster).submit(req).job_id == "22"
    assert cluster.sinfos() == 0


def test_the_sites_own_time_is_a_misconfiguration(tmp_path: Path) -> None:
    """A --time in sbatch_arguments comes after the request's in the script: sbatch uses it,
    and it is the site file to fix (MISCONFIGURED), not the request."""
    req = request(tmp_path, '"--time=45"', time_minutes=10)
    cluster = Cluster()
    with pytest.raises(BackendMisconfigured) as refused:
        backend(req, cluster).submit(req)
    assert str(refused.value) == (
        "[slurm] sbatch_arguments --time=45 exceeds partition main's MaxTime (30 min)"
    )
    assert "lower --time in [slurm] sbatch_arguments of" in refused.value.fix
    assert not refused.value.maybe_submitted and cluster.submitted() == 0


def test_a_failed_sinfo_leaves_it_to_sbatch_whose_refusal_is_the_requests_fault(
    tmp_path: Path,
) -> None:
    req = request(tmp_path, time_minutes=60, partition="main")
    cluster = Cluster(sinfo_rc=1, sbatch=(1, "", REFUSED))
    with pytest.raises(SubmitRejected) as refused:
        backend(req, cluster).submit(req)
    assert "Requested time limit is invalid" in str(refused.value)
    assert not refused.value.retryable and cluster.submitted() == 1


def test_an_outage_at_sbatch_stays_an_outage(tmp_path: Path) -> None:
    req = request(tmp_path, time_minutes=10)
    said = "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation"
    cluster = Cluster(sbatch=(1, "", said))
    with pytest.raises(BackendUnavailable) as failed:
        backend(req, cluster).submit(req)
    assert not isinstance(failed.value, SubmitRejected)
    assert failed.value.retryable and failed.value.maybe_submitted


def test_the_limits_asked_ahead_while_the_run_is_recorded_are_the_ones_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`vibesys run` prewarms: sinfo is asked on its connection while the invocation is
    recorded, and the submit's check asks no sinfo of its own."""
    req = request(tmp_path, time_minutes=60, partition="main")
    ahead, later = Cluster(), Cluster()
    monkeypatch.setattr(sbatch_module, "runner_from_config", lambda config: ahead)
    prewarm(req.spec)
    with pytest.raises(SubmitRejected, match="exceeds partition main's MaxTime"):
        backend(req, later).submit(req)
    assert (ahead.sinfos(), later.sinfos(), later.submitted()) == (1, 0, 0)
    # Without a time to check, prewarm only warms the connection: no sinfo.
    quiet = request(tmp_path)
    prewarm(quiet.spec)
    assert ahead.sinfos() == 1
