"""The sbatch adapter refuses a time no partition allows before anything is submitted (the
submit command asks sinfo itself: still one remote command; a time it showed to fit is not
asked again for a minute), blames the request or the site's
sbatch_arguments, and reads sbatch's own refusal as the request's fault, never as an outage.
The submit command runs for real with a scripted sinfo and sbatch: these need no Slurm (the
live test is tests/slurm/test_resources_slurm.py)."""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from vibesys.adapters.base import JobContext, Submission
from vibesys.adapters.slurm import sbatch as sbatch_module
from vibesys.adapters.slurm.request import SbatchRequest, make_request
from vibesys.adapters.slurm.sbatch import SbatchBackend
from vibesys.adapters.transports import CommandResult
from vibesys.errors import BackendMisconfigured, BackendUnavailable, SubmitRejected

SINFO = "main* 30:00\npriority 2:00:00\nshort 5:00\n"
REFUSED = (
    "sbatch: error: Batch job submission failed: Requested time limit is invalid "
    "(missing or exceeds some limit)\n"
)


class Cluster:
    """Runs the submit command for real (sh, awk) with a scripted `sinfo` (SINFO, or a failure)
    and `sbatch` (its answer) first on PATH; counts the commands and the sbatch calls."""

    def __init__(
        self, tmp_path: Path, sinfo_rc: int = 0, sbatch: tuple[int, str, str] = (0, "22", "")
    ) -> None:
        self.bin = tmp_path / "fakebin"
        self.bin.mkdir(exist_ok=True)
        self.log = tmp_path / "fakebin.log"
        said = SINFO if sinfo_rc == 0 else "slurm_load_partitions: Socket timed out\n"
        self._script(
            "sinfo", f"printf %s {shlex.quote(said)} >&{1 if sinfo_rc == 0 else 2}", sinfo_rc
        )
        code, out, err = sbatch
        self._script(
            "sbatch", f"printf '%s\\n' {shlex.quote(out)}; printf %s {shlex.quote(err)} >&2", code
        )
        self.calls: list[list[str]] = []

    def _script(self, name: str, body: str, code: int) -> None:
        path = self.bin / name
        path.write_text(f"#!/bin/sh\necho {name} >> {self.log}\n{body}\nexit {code}\n")
        path.chmod(0o755)

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
        path = f"{self.bin}:{os.environ['PATH']}"
        done = subprocess.run(
            argv, input=input, capture_output=True, timeout=30, env={**os.environ, "PATH": path}
        )
        return CommandResult(
            done.returncode, done.stdout.decode(), done.stderr.decode(), tuple(argv)
        )

    def stream(
        self, argv: Sequence[str], sink: object, *, timeout: float | None = None
    ) -> CommandResult:
        raise AssertionError(f"nothing is streamed: {argv}")

    def ran(self, name: str) -> int:
        said = self.log.read_text().split() if self.log.exists() else []
        return said.count(name)


def request(
    tmp_path: Path, sbatch_arguments: str = "", **values: object
) -> Submission[SbatchRequest]:
    config = tmp_path / "slurm.toml"
    config.write_text(
        f'[slurm]\nname = "t"\nremote_workspace_root = "{tmp_path / "remote"}"\n'
        f"sbatch_arguments = [{sbatch_arguments}]\n"
        '[slurm.transport]\nkind = "local"\n'
    )
    request = make_request("sbatch", {"slurm_config": str(config), **values})
    assert isinstance(request, SbatchRequest)
    attempt_dir = tmp_path / "local" / "inv" / "1"
    context = JobContext(str(tmp_path))
    return Submission("inv", 1, "vibesys-inv-1", ("true",), attempt_dir, context, request)


def backend(req: Submission[SbatchRequest], cluster: Cluster) -> SbatchBackend:
    return SbatchBackend(req.request.site(), runner=cluster)


def test_a_time_beyond_the_partition_is_refused_before_anything_is_submitted(
    tmp_path: Path,
) -> None:
    req = request(tmp_path, time_minutes=60, partition="main")
    cluster = Cluster(tmp_path)
    with pytest.raises(SubmitRejected) as refused:
        backend(req, cluster).submit(req)
    assert str(refused.value) == (
        "--time 60 exceeds partition main's MaxTime (30 min): nothing submitted"
    )
    assert not refused.value.retryable and not refused.value.maybe_submitted
    # One remote command, which asked sinfo and stopped: no sbatch, no remote directory.
    assert (len(cluster.calls), cluster.ran("sinfo"), cluster.ran("sbatch")) == (1, 1, 0)
    assert not (tmp_path / "remote").exists()


def test_the_default_partition_is_the_one_compared_and_a_fit_is_submitted(
    tmp_path: Path,
) -> None:
    cluster = Cluster(tmp_path)
    req = request(tmp_path, time_minutes=31)
    with pytest.raises(SubmitRejected, match=r"--time 31 exceeds partition main's MaxTime"):
        backend(req, cluster).submit(req)
    fits = request(tmp_path, time_minutes=60, partition="priority")
    sbatch = backend(fits, cluster)
    assert sbatch.submit(fits).job_id == "22"
    # Each submission is one command: the check rides on it, never a round trip of its own.
    assert (len(cluster.calls), cluster.ran("sinfo"), cluster.ran("sbatch")) == (2, 2, 1)


def test_a_time_shown_to_fit_is_not_asked_again_for_a_while(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many jobs submitted at once ask sinfo once, not once each; another time, another
    partition, or the same after FIT_SECONDS is asked again."""
    cluster = Cluster(tmp_path)
    fits = request(tmp_path, time_minutes=20, partition="main")
    sbatch = backend(fits, cluster)
    for _ in range(3):
        assert sbatch.submit(fits).job_id == "22"
    assert (cluster.ran("sinfo"), cluster.ran("sbatch")) == (1, 3)
    # Another backend of this process (a Client's other handle) shares what was seen.
    assert backend(fits, cluster).submit(fits).job_id == "22"
    other = request(tmp_path, time_minutes=21, partition="main")
    assert sbatch.submit(other).job_id == "22"
    assert (cluster.ran("sinfo"), cluster.ran("sbatch")) == (2, 5)
    # Over: refused, and asked each time (a refusal is never remembered as a fit).
    over = request(tmp_path, time_minutes=31, partition="main")
    for _ in range(2):
        with pytest.raises(SubmitRejected):
            sbatch.submit(over)
    assert (cluster.ran("sinfo"), cluster.ran("sbatch")) == (4, 5)
    later = time.monotonic() + sbatch_module.FIT_SECONDS + 1
    monkeypatch.setattr(sbatch_module.FITS_SEEN, "clock", lambda: later)
    assert sbatch.submit(fits).job_id == "22"
    assert (cluster.ran("sinfo"), cluster.ran("sbatch")) == (5, 6)


def test_a_failed_sinfo_is_asked_again(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, sinfo_rc=1)
    fits = request(tmp_path, time_minutes=20, partition="main")
    sbatch = backend(fits, cluster)
    for _ in range(2):
        assert sbatch.submit(fits).job_id == "22"
    assert (cluster.ran("sinfo"), cluster.ran("sbatch")) == (2, 2)


def test_a_request_without_a_time_asks_no_sinfo(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    req = request(tmp_path)
    assert backend(req, cluster).submit(req).job_id == "22"
    assert (cluster.ran("sinfo"), cluster.ran("sbatch")) == (0, 1)


def test_the_sites_own_time_is_a_misconfiguration(tmp_path: Path) -> None:
    """A --time in sbatch_arguments comes after the request's in the script: sbatch uses it,
    and it is the site file to fix (MISCONFIGURED), not the request."""
    req = request(tmp_path, '"--time=45"', time_minutes=10)
    cluster = Cluster(tmp_path)
    with pytest.raises(BackendMisconfigured) as refused:
        backend(req, cluster).submit(req)
    assert str(refused.value) == (
        "[slurm] sbatch_arguments --time=45 exceeds partition main's MaxTime (30 min)"
    )
    assert "lower --time in [slurm] sbatch_arguments of" in refused.value.fix
    assert not refused.value.maybe_submitted and cluster.ran("sbatch") == 0


def test_a_failed_sinfo_leaves_it_to_sbatch_whose_refusal_is_the_requests_fault(
    tmp_path: Path,
) -> None:
    req = request(tmp_path, time_minutes=60, partition="main")
    cluster = Cluster(tmp_path, sinfo_rc=1, sbatch=(1, "", REFUSED))
    with pytest.raises(SubmitRejected) as refused:
        backend(req, cluster).submit(req)
    assert "Requested time limit is invalid" in str(refused.value)
    assert not refused.value.retryable and cluster.ran("sbatch") == 1


def test_an_outage_at_sbatch_stays_an_outage(tmp_path: Path) -> None:
    req = request(tmp_path, time_minutes=10)
    said = "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation"
    cluster = Cluster(tmp_path, sbatch=(1, "", said))
    with pytest.raises(BackendUnavailable) as failed:
        backend(req, cluster).submit(req)
    assert not isinstance(failed.value, SubmitRejected)
    assert failed.value.retryable and failed.value.maybe_submitted


@pytest.mark.parametrize(
    ("sinfo", "minutes", "targets", "refused"),
    [
        ("main* 30:00\n", 30, "", False),
        ("main* 30:00\n", 31, "", True),
        ("main* 30:59\n", 31, "", True),  # a limit's seconds round down
        ("main 30:00\nlong* 2:00:00\n", 120, "", False),
        ("main 30:00\nlong* 2:00:00\n", 121, "", True),
        ("main* 1-00:00:00\n", 1440, "", False),
        ("main* 1-00:00:00\n", 1441, "", True),
        ("main* 2-12\n", 3600, "", False),
        ("main* 2-12\n", 3601, "", True),
        ("main* 45\n", 46, "", True),
        ("main* UNLIMITED\n", 99999, "", False),
        ("main* infinite\n", 99999, "", False),
        ("main* n/a\n", 99999, "", False),  # no limit reported: nothing proven
        ("main* 30:00\n", 60, "other", False),  # a partition sinfo does not list
        ("main* 30:00\nlong 2:00:00\n", 60, "main,long", False),  # one of them allows it
        ("main* 30:00\nshort 5:00\n", 60, "main,short", True),
        ("main* 2:00:00\nmain* 30:00\n", 60, "", True),  # over several lines: the smaller
        ("main* 30:00\nmain* UNLIMITED\n", 60, "", True),
        ("main* 30:00 extra\n", 60, "", False),  # a line it cannot read proves nothing
        ("main* soon\n", 60, "", False),
        ("", 60, "", False),  # sinfo said nothing (it failed)
        ("main 30:00\n", 60, "", False),  # no default partition
    ],
)
def test_the_submit_commands_check_refuses_only_what_is_proven_too_long(
    sinfo: str, minutes: int, targets: str, refused: bool
) -> None:
    done = subprocess.run(
        ["awk", "-v", f"want={minutes}", "-v", f"targets={targets}", sbatch_module.FITS],
        input=sinfo,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == (1 if refused else 0), done.stderr
