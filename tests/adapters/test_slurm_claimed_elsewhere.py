"""Several jobs of one attempt's name (a copy of its batch script submitted by hand, or a
lookup after a crash that finds two): the attempt's job is the one that claimed it. The other
found the attempt claimed and ran nothing (exit 85); its end is not the attempt's outcome.
Scripted Slurm answers in the 22.05 formats the round asks for; no cluster."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from tests.helpers.scripted_slurm import ScriptedSlurm
from vibesys.adapters.base import JobRef, RemoteState, RemoteStatus
from vibesys.adapters.slurm.backend import SlurmBackend
from vibesys.config.load import parse_slurm_config

NAME = "vibesys-0123456789abcdef-1"
ROOT = "/nonexistent/vibesys-remote"
CONFIG = f"""
[slurm]
name = "scripted"
remote_workspace_root = "{ROOT}"
[slurm.transport]
kind = "ssh"
host = "login.example"
user = "eval"
"""
WHERE = "|node1|2026-12-01T03:00:46|2026-12-01T03:10:46|1"
REFUSED = f"581|{NAME}|FAILED|NonZeroExitCode|main|N/A{WHERE}\n"
CLAIMER_RUNNING = f"590|{NAME}|RUNNING|None|main|N/A{WHERE}\n"


def claim_by(job_id: str, started_at: str = "2026-12-01T03:00:46Z") -> str:
    return f"kind=job\nhost=node1\nstarted_at={started_at}\nslurm_job_id={job_id}\n"


def scripted(squeue: str, *, code: str = "", claim: str = "", sacct: str = "") -> ScriptedSlurm:
    """squeue and the remote attempt directory in one answer, as a round over SSH gets them."""
    files = {"exit_code": f"{code}\n" if code else "", "claim": claim}
    markers = {f"{ROOT}/0123456789abcdef/1": {k: v for k, v in files.items() if v}}
    return ScriptedSlurm(squeue, sacct, markers=markers)


def status(runner: ScriptedSlurm, job_id: str | None = "581") -> RemoteStatus:
    scheduler = SlurmBackend(parse_slurm_config(CONFIG), runner)
    job = JobRef(NAME, job_id, Path("/nonexistent/local"), None, "0123456789abcdef", 1)
    return scheduler.status([job])[NAME]


def test_a_refused_job_is_followed_by_the_job_that_claimed_the_attempt() -> None:
    seen = status(scripted(REFUSED + CLAIMER_RUNNING, claim=claim_by("590")))
    assert (seen.state, seen.job_id, seen.exit_code) == (RemoteState.RUNNING, "590", None)
    assert seen.observation.startswith("job 581 found the attempt claimed by job 590; squeue: 590|")
    assert seen.provenance["slurm_job_id"] == "590"


def test_the_claimers_marker_is_the_outcome_once_squeue_forgot_it() -> None:
    seen = status(scripted(REFUSED, code="3", claim=claim_by("590")))
    assert (seen.state, seen.job_id, seen.exit_code) == (RemoteState.FAILED, "590", 3)
    assert seen.observation.startswith("job 581 found the attempt claimed by job 590; ")
    assert "marker exit_code=3" in seen.observation


def test_a_claimer_gone_without_a_marker_is_not_the_refused_jobs_end() -> None:
    runner = scripted(REFUSED, claim=claim_by("590"))
    seen = status(runner)
    assert (seen.state, seen.exit_code) == (RemoteState.NOT_FOUND, None)
    assert seen.claim is not None and seen.claim.get("slurm_job_id") == "590"
    # Known to neither squeue nor sacct, asked by its own id, long after it claimed: killed.
    assert seen.final
    assert [c for c in runner.calls if c[0] == "sacct"][-1][-2:] == ["-j", "590"]


def test_a_claimer_that_claimed_a_moment_ago_is_not_given_up() -> None:
    just_now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    seen = status(scripted(REFUSED, claim=claim_by("590", just_now)))
    assert (seen.state, seen.final) == (RemoteState.NOT_FOUND, False)


def test_a_claimer_under_another_name_is_found_by_its_id() -> None:
    sacct = "590|copy-of-it|RUNNING|0:0|2026-12-01T03:00:46|Unknown|None|main|node1|cpu=1\n"
    seen = status(scripted(REFUSED, claim=claim_by("590"), sacct=sacct))
    assert (seen.state, seen.job_id) == (RemoteState.RUNNING, "590")
    assert seen.observation.startswith("job 581 found the attempt claimed by job 590; sacct: ")


def test_the_job_that_claimed_is_followed_as_usual() -> None:
    runner = scripted(REFUSED.replace("581", "600") + CLAIMER_RUNNING, claim=claim_by("590"))
    seen = status(runner, job_id="590")
    assert (seen.state, seen.job_id) == (RemoteState.RUNNING, "590")
    assert seen.observation.startswith("squeue: 590|")


def test_a_lookup_by_name_takes_the_earliest_job_until_one_claims() -> None:
    pending = f"581|{NAME}|PENDING|Priority|main|N/A|||N/A|1\n"
    later = f"590|{NAME}|PENDING|Priority|main|N/A|||N/A|1\n"
    seen = status(scripted(later + pending), job_id=None)
    assert (seen.state, seen.job_id) == (RemoteState.PENDING, "581")


def test_a_cancel_reaches_every_job_of_the_attempts_name(tmp_path: Path) -> None:
    """The recorded job may be the copy that ran nothing: the cancel names the attempt."""
    runner = scripted("")
    scheduler = SlurmBackend(parse_slurm_config(CONFIG), runner)
    scheduler.cancel(JobRef(NAME, "581", tmp_path, None, "0123456789abcdef", 1))
    assert runner.calls == [["scancel", "--name", NAME]]
    assert (tmp_path / "cancel_requested").exists()


def test_a_copy_that_ended_while_the_recorded_job_waits_is_the_outcome() -> None:
    """The copy ran and ended before vibesys's job left the queue: the end is known now (the
    probe saw the marker; another round would tell nothing new until the job refuses)."""
    pending = f"581|{NAME}|PENDING|Resources|main|gpu:1|||N/A|1\n"
    seen = status(scripted(pending, code="0", claim=claim_by("590")))
    assert (seen.state, seen.job_id, seen.exit_code) == (RemoteState.COMPLETED, "590", 0)


def test_its_own_marker_before_squeue_sees_the_end_changes_nothing() -> None:
    running = f"581|{NAME}|RUNNING|None|main|N/A{WHERE}\n"
    seen = status(scripted(running, code="0", claim=claim_by("581")))
    assert (seen.state, seen.job_id) == (RemoteState.RUNNING, "581")


def test_squeue_speaks_for_a_cancel_whose_reason_sacct_has_not_written_yet() -> None:
    """A child Slurm killed for its parent's failure: squeue says why at once
    (DependencyNeverSatisfied), sacct a moment later (seen under load: no uid, reason None).
    Until sacct has it, squeue's row is the evidence; a scancel (squeue keeps the reason the
    job waited for) is still sacct's to tell."""
    killed = f"581|{NAME}|CANCELLED|DependencyNeverSatisfied|main|N/A||N/A|2026-12-01T03:00:46|1\n"
    unwritten = f"581|{NAME}|CANCELLED|0:0|None|2026-12-01T03:00:46|None|main|None assigned|\n"
    seen = status(scripted(killed, sacct=unwritten))
    assert seen.state is RemoteState.DEPENDENCY_NEVER_SATISFIED, seen.observation
    assert seen.observation.startswith("squeue: "), seen.observation
    scancelled = killed.replace("DependencyNeverSatisfied", "Priority")
    seen = status(scripted(scancelled, sacct=unwritten))
    assert seen.state is RemoteState.CANCELLED and seen.observation.startswith("sacct: "), seen


def test_only_sacct_tells_a_cancel_that_never_got_a_node() -> None:
    """A cancel the planner may read as Slurm's dependency kill (no one named, never
    started) is sacct's to tell: its row names the uid of a scancel and a node list only for
    a job that got a node; squeue's row names neither, and proves nothing of the kind."""
    gone = ""
    killed = f"581|{NAME}|CANCELLED|0:0|None|2026-12-01T03:00:46|None|main|None assigned|\n"
    seen = status(scripted(gone, sacct=killed))
    assert (seen.state, seen.cancelled_by, seen.never_started) == (
        RemoteState.CANCELLED,
        None,
        True,
    ), seen
    ran = killed.replace("None assigned", "node1")
    assert not status(scripted(gone, sacct=ran)).never_started
    listed = f"581|{NAME}|CANCELLED|Priority|main|N/A||N/A|2026-12-01T03:00:46|1\n"
    seen = status(scripted(listed, sacct=""))
    assert seen.state is RemoteState.CANCELLED and not seen.never_started, seen
