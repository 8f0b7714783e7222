"""The adapter against a scripted fake `sky` whose outputs copy the real ones; jobs really run
(the wrapper's claim and markers land on the local file system)."""

from __future__ import annotations

import io
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from msgspec import ValidationError, structs

from tests.helpers.skyfake import FakeSky, ref, wait_terminal
from tests.helpers.skyfake import submit_request as request
from vibesys.adapters.base import JobContext, RemoteState
from vibesys.adapters.leases import LeaseAction
from vibesys.adapters.rundir.claim import fence_text
from vibesys.adapters.skypilot.boundary import Completed, SkyCli
from vibesys.adapters.skypilot.errors import (
    ClusterGone,
    ClusterIncompatible,
    SkyMalformedOutput,
    SkyNotInstalled,
    SkyTimeout,
    SkyVersionMismatch,
)
from vibesys.adapters.skypilot.ops import SkyOps
from vibesys.adapters.skypilot.wrapper import REFUSED_EXIT
from vibesys.errors import SubmitRejected


def test_launch_once_execute_twice_release_once(fake_sky: FakeSky) -> None:
    backend = fake_sky.backend()
    assert backend.check_version() == "0.14.1"
    first = backend.ensure_lease()
    assert first.launched and first.allocation == ("200",)
    ok = request(fake_sky, "inv-a", 1, ["sh", "-c", "echo fine"])
    receipt = backend.submit(ok)
    assert receipt.job_id == "1@200"
    done = wait_terminal(backend, ref(ok, receipt.job_id))
    assert (done.state, done.exit_code) == (RemoteState.COMPLETED, 0)

    again = backend.ensure_lease()
    assert not again.launched and again.allocation == first.allocation
    # The refresh cleared SkyPilot's node names: the allocation came from Slurm (squeue).
    assert fake_sky.calls("--helper") and fake_sky.calls("--squeue")
    bad = request(fake_sky, "inv-b", 1, ["sh", "-c", "echo broken >&2; exit 3"])
    receipt = backend.submit(bad)
    assert receipt.job_id == "2@200"
    failed = wait_terminal(backend, ref(bad, receipt.job_id))
    assert (failed.state, failed.exit_code) == (RemoteState.FAILED, 3)

    backend.release()
    backend.release()  # idempotent: an unknown cluster is fine
    assert len(fake_sky.calls("launch")) == 1
    assert len(fake_sky.calls("exec")) == 2
    assert len(fake_sky.calls("down")) == 2
    assert fake_sky.cluster_state(backend.cluster) is None


def test_reuses_an_existing_compatible_cluster(fake_sky: FakeSky) -> None:
    fake_sky.backend().ensure_lease()
    restarted = fake_sky.backend()  # another vibesys process, same campaign
    plan = restarted.plan_lease()
    assert plan.action is LeaseAction.REUSE
    receipt = restarted.launch(plan)
    assert not receipt.launched and receipt.allocation == ("200",)
    assert len(fake_sky.calls("launch")) == 1


def test_rejects_an_incompatible_cluster_without_touching_it(fake_sky: FakeSky) -> None:
    other = fake_sky.backend(cpus_per_node=4)
    mine = fake_sky.backend(cpus_per_node=1)
    # Someone launched a cluster under our name with another shape.
    mine.cluster = other.cluster
    other.ensure_lease()
    with pytest.raises(ClusterIncompatible, match=r"4 CPUs per node \(wanted 1\)"):
        mine.plan_lease()
    assert len(fake_sky.calls("launch")) == 1
    assert fake_sky.calls("down") == []
    assert fake_sky.cluster_state(other.cluster) is not None


def test_finds_a_running_job_again_after_a_crash_without_a_second_exec(fake_sky: FakeSky) -> None:
    backend = fake_sky.backend()
    backend.ensure_lease()
    long = request(fake_sky, "inv-c", 1, ["sleep", "30"])
    backend.submit(long)
    # vibesys died before it recorded the job id: a new process looks the job up by name.
    restarted = fake_sky.backend()
    found = restarted.status([ref(long, None)])[long.job_name]
    for _ in range(100):
        if found.state is RemoteState.RUNNING:
            break
        found = restarted.status([ref(long, None)])[long.job_name]
    assert found.state is RemoteState.RUNNING
    assert found.job_id == "1@200"
    assert len(fake_sky.calls("exec")) == 1
    restarted.cancel(ref(long, found.job_id))
    assert wait_terminal(restarted, ref(long, found.job_id)).state is RemoteState.CANCELLED


def test_replaces_an_expired_allocation(fake_sky: FakeSky) -> None:
    backend = fake_sky.backend()
    first = backend.ensure_lease()
    doomed = request(fake_sky, "inv-d", 1, ["sleep", "30"])
    receipt = backend.submit(doomed)
    job = ref(doomed, receipt.job_id)
    for _ in range(100):
        if backend.dirs.state(job).claim is not None:
            break
        backend.status([job])
    fake_sky.control("fake-lose", backend.cluster)  # scancel of the holding allocation
    lost = backend.status([job])[job.job_name]
    assert lost.state is RemoteState.ALLOCATION_EXPIRED
    plan = backend.plan_lease()
    assert plan.action is LeaseAction.LAUNCH
    second = backend.launch(plan)
    assert second.launched and second.allocation != first.allocation
    # The old attempt stays expired on the new allocation (its claim names the old one).
    assert backend.status([job])[job.job_name].state is RemoteState.ALLOCATION_EXPIRED
    retry = request(fake_sky, "inv-d", 2, ["sh", "-c", "echo again"])
    receipt = backend.submit(retry)
    assert receipt.job_id == f"1@{second.allocation[0]}"
    done = wait_terminal(backend, ref(retry, receipt.job_id))
    assert (done.state, done.exit_code) == (RemoteState.COMPLETED, 0)


def test_streams_logs_by_offset_and_returns_artifacts(fake_sky: FakeSky, tmp_path: Path) -> None:
    candidate = tmp_path / "candidate"
    candidate.mkdir()
    (candidate / "bench.sh").write_text(
        "echo first line\necho warn >&2\nmkdir -p results\n"
        "echo '{\"score\": 7}' > results/out.json\n"
    )
    backend = fake_sky.backend()
    backend.ensure_lease()
    req = request(fake_sky, "inv-e", 1, ["sh", "bench.sh"], workdir=str(candidate))
    job = ref(req, backend.submit(req).job_id)
    assert wait_terminal(backend, job).state is RemoteState.COMPLETED
    sink = io.BytesIO()
    assert backend.read_log(job, "stdout", 0, sink) == len(b"first line\n")
    assert backend.read_log(job, "stdout", 6, sink) == len(b"line\n")
    assert sink.getvalue() == b"first line\nline\n"
    err = io.BytesIO()
    backend.read_log(job, "stderr", 0, err)
    assert err.getvalue() == b"warn\n"
    found, missing = backend.list_artifacts(job, ["results/*.json", "none/*"])
    assert [a.path for a in found] == ["results/out.json"] and missing == ["none/*"]
    blob = io.BytesIO()
    backend.fetch_artifact(job, "results/out.json", blob)
    assert blob.getvalue() == b'{"score": 7}\n'
    # The candidate itself is untouched: the command ran in the attempt's private copy.
    assert not (candidate / "results").exists()
    evidence = backend.collect(job)
    assert "exit_code=0" in evidence
    assert (req.attempt_dir / "exit_code").read_text() == "0\n"
    assert "vibesys: exit_code=0" in (req.attempt_dir / "sky.log").read_text()


def test_cancels_a_job_without_releasing_the_cluster(fake_sky: FakeSky) -> None:
    backend = fake_sky.backend()
    backend.ensure_lease()
    req = request(fake_sky, "inv-f", 1, ["sleep", "30"])
    job = ref(req, backend.submit(req).job_id)
    backend.cancel(job)
    ended = wait_terminal(backend, job)
    assert (ended.state, ended.cancelled_by) == (RemoteState.CANCELLED, "vibesys")
    backend.cancel(job)  # idempotent
    assert fake_sky.calls("down") == []
    record = backend.inspect(refresh=True)
    assert record is not None and record.status == "UP"


def test_a_fenced_attempt_refuses_to_run(fake_sky: FakeSky) -> None:
    backend = fake_sky.backend()
    backend.ensure_lease()
    req = request(fake_sky, "inv-g", 1, ["sh", "-c", "touch ran"])
    job = ref(req, None)
    claim = backend.fence(job, fence_text("tester", "now", "ambiguous"))
    assert claim.fenced and claim.get("by") == "tester"
    job = ref(req, backend.submit(req).job_id)  # the late exec arrives after the fence
    refused = wait_terminal(backend, job)
    assert refused.state is RemoteState.LAUNCH_FAILED
    state = backend.dirs.state(job)
    assert state.refused is not None and "kind=fence" in state.refused
    assert not Path(str(backend.dirs.work_dir(job))).exists()  # nothing ran, nothing copied
    assert backend.fence(job, fence_text("other", "later", "again")).get("by") == "tester"
    queued = backend.ops.queue(backend.cluster)
    assert queued is not None and queued[0].status == "FAILED"
    assert REFUSED_EXIT == 85


def test_a_fence_after_the_job_claimed_returns_the_jobs_claim(fake_sky: FakeSky) -> None:
    backend = fake_sky.backend()
    backend.ensure_lease()
    req = request(fake_sky, "inv-h", 1, ["sh", "-c", "exit 0"])
    job = ref(req, backend.submit(req).job_id)
    wait_terminal(backend, job)
    claim = backend.fence(job, fence_text("tester", "now", "ambiguous"))
    assert claim.kind == "job" and claim.get("sky_job_id") == "1"
    assert claim.get("slurm_job_id") == "200" and claim.get("attempt_job_id") == "1@200"
    provenance = backend.status([job])[job.job_name].provenance
    assert provenance["sky_job_id"] == "1" and provenance["allocation_job_id"] == "200"
    assert provenance["cluster"] == backend.cluster and provenance["profile"] == "test"
    assert provenance["infra"] == "slurm/localslurm" and provenance["host"]


def test_not_found_only_when_no_exec_request_is_in_flight(fake_sky: FakeSky) -> None:
    backend = fake_sky.backend()
    backend.ensure_lease()
    never = ref(request(fake_sky, "inv-i", 1, ["true"]), None)
    assert backend.status([never])[never.job_name].state is RemoteState.NOT_FOUND
    fake_sky.control("fake-inflight", "1")
    assert backend.status([never])[never.job_name].state is RemoteState.UNKNOWN


def test_exec_on_a_cluster_that_is_gone_proves_nothing_ran(fake_sky: FakeSky) -> None:
    backend = fake_sky.backend()
    with pytest.raises(ClusterGone) as caught:
        backend.submit(request(fake_sky, "inv-j", 1, ["true"]))
    assert caught.value.maybe_submitted is False and caught.value.retryable


def test_refuses_another_skypilot_version(fake_sky: FakeSky) -> None:
    fake_sky.version = "0.13.0"
    with pytest.raises(
        SkyVersionMismatch, match=r"SkyPilot 0\.13\.0 .* exactly 0\.14\.1"
    ) as caught:
        fake_sky.backend().check_version()
    assert not caught.value.retryable and "skypilot-env" in caught.value.fix


def test_missing_sky_is_a_typed_error(tmp_path: Path) -> None:
    ops = SkyOps(SkyCli(venv=tmp_path / "nowhere"))
    with pytest.raises(SkyNotInstalled) as caught:
        ops.status("x", refresh=False)
    assert caught.value.maybe_submitted is False and not caught.value.retryable


@pytest.mark.parametrize(
    "error", [PermissionError(13, "Permission denied"), OSError(8, "Exec format error")]
)
def test_a_sky_that_cannot_start_is_misconfigured_not_maybe_submitted(error: OSError) -> None:
    ops = SkyOps(scripted(error))
    with pytest.raises(SkyNotInstalled) as caught:
        ops.status("x", refresh=False)
    assert caught.value.maybe_submitted is False and caught.value.fix


def scripted(reply: Completed | BaseException) -> SkyCli:
    def runner(argv: Sequence[str], env: Mapping[str, str], timeout: float) -> Completed:
        if isinstance(reply, BaseException):
            raise reply
        return reply

    return SkyCli(runner=runner, secrets=("hunter2",))


def test_an_exec_that_times_out_may_have_been_submitted(tmp_path: Path) -> None:
    ops = SkyOps(scripted(subprocess.TimeoutExpired(["sky"], 5)))
    with pytest.raises(SkyTimeout) as caught:
        ops.exec("c", tmp_path / "task.json")
    assert caught.value.maybe_submitted and caught.value.retryable
    with pytest.raises(SkyTimeout) as status_caught:
        ops.queue("c")
    assert not status_caught.value.maybe_submitted


def test_malformed_exec_output_is_typed_and_may_have_submitted(tmp_path: Path) -> None:
    ops = SkyOps(scripted(Completed(0, "Submitting job to cluster: c\n", "")))
    with pytest.raises(SkyMalformedOutput) as caught:
        ops.exec("c", tmp_path / "task.json")
    assert caught.value.maybe_submitted and not caught.value.retryable


def test_control_plane_failures_are_redacted(tmp_path: Path) -> None:
    stderr = (
        'sky.exceptions.CommandError: srun ... --env-vars={"HF_TOKEN": "abc123", "X": "1"} '
        "API_KEY=sekret password hunter2 failed with return code 1."
    )
    ops = SkyOps(scripted(Completed(1, "", stderr)))
    with pytest.raises(Exception) as caught:
        ops.exec("c", tmp_path / "task.json")
    text = f"{caught.value} {getattr(caught.value, 'evidence', '')}"
    assert "abc123" not in text and "sekret" not in text and "hunter2" not in text
    assert '"X": "1"' in text and getattr(caught.value, "maybe_submitted", False)


def test_an_exec_that_went_through_is_submitted_even_if_its_allocation_cannot_be_read(
    fake_sky: FakeSky, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vibesys.errors import TransportLost

    backend = fake_sky.backend()
    backend.ensure_lease()

    def unreachable() -> str:
        raise TransportLost("login node unreachable", maybe_submitted=False)

    monkeypatch.setattr(backend, "allocation", unreachable)
    job = request(fake_sky, "inv-a", 1, ["sh", "-c", "echo fine"])
    receipt = backend.submit(job)  # no error: an error here would read "nothing submitted"
    assert receipt.job_id == "1@?"  # the allocation comes with the claim and the next status
    assert len(fake_sky.calls("exec")) == 1


def test_a_job_ended_by_its_marker_takes_the_markers_time_till_the_queue_has_one(
    fake_sky: FakeSky,
) -> None:
    """The wrapper writes the exit code a moment before SkyPilot's queue records an end (the
    status may already come from the marker): the marker's own time is the end till then."""
    backend = fake_sky.backend()
    backend.ensure_lease()
    req = request(fake_sky, "inv-end", 1, ["sh", "-c", "exit 0"])
    job = ref(req, backend.submit(req).job_id)
    wait_terminal(backend, job)
    marker = fake_sky.remote / "inv-end" / "1" / "exit_code"
    os.utime(marker, (1_700_000_000, 1_700_000_000))
    [queued] = fake_sky.cluster_state(backend.cluster)["jobs"]  # type: ignore[index]
    rc_file = Path(queued["rc_file"])
    os.utime(rc_file, (1_700_000_100, 1_700_000_100))
    # The queue's end time, once it has one, is SkyPilot's own account.
    ended = backend.status([job])[job.job_name]
    assert ended.provenance["ended_at"] == "2023-11-14T22:15:00Z"

    rc_file.unlink()  # the queue not caught up yet
    status = backend.status([job])[job.job_name]
    assert (status.state, status.exit_code) == (RemoteState.COMPLETED, 0)
    assert status.provenance["ended_at"] == "2023-11-14T22:13:20Z"


def test_passed_variables_reach_the_job_by_name_only(fake_sky: FakeSky) -> None:
    backend = fake_sky.backend()
    backend.ensure_lease()
    secret = "passed-value-xyz"
    ok = request(
        fake_sky, "inv-p", 1, ["sh", "-c", 'test "$WANDB_KEY" = "$EXPECT"'], pass_env=["WANDB_KEY"]
    )
    # The context holds the host's variables too; only the listed one goes to the job.
    context = JobContext(ok.context.cwd, {"WANDB_KEY": secret, "EXPECT": secret})
    ok = structs.replace(ok, context=context)
    done = wait_terminal(backend, ref(ok, backend.submit(ok).job_id))
    assert (done.state, done.exit_code) == (RemoteState.FAILED, 1)  # EXPECT did not reach it
    both = structs.replace(
        ok,
        invocation_id="inv-q",
        job_name="vibesys-inv-q-1",
        attempt_dir=ok.attempt_dir.parent / "q",
    )
    both = structs.replace(both, request=fake_sky.request(pass_env=["WANDB_KEY", "EXPECT"]))
    done = wait_terminal(backend, ref(both, backend.submit(both).job_id))
    assert (done.state, done.exit_code) == (RemoteState.COMPLETED, 0)
    last = fake_sky.calls("exec")[-1]
    assert last[:6] == ["exec", "-d", "--secret", "EXPECT", "--secret", "WANDB_KEY"]
    assert secret not in (ok.attempt_dir / "task.json").read_text()


def test_a_passed_variable_the_context_lacks_is_rejected(fake_sky: FakeSky) -> None:
    backend = fake_sky.backend()
    missing = request(fake_sky, "inv-m", 1, ["true"], pass_env=["NOT_SET"])
    with pytest.raises(SubmitRejected, match="NOT_SET is not in the invocation's recorded"):
        backend.submit(missing)
    assert fake_sky.calls("exec") == []


@pytest.mark.parametrize("name", ["HOME", "PYTHONPATH", "SKYPILOT_DEBUG", "LD_PRELOAD", "1X"])
def test_names_the_client_reads_cannot_be_passed(fake_sky: FakeSky, name: str) -> None:
    with pytest.raises(ValidationError):
        fake_sky.request(pass_env=[name])


def test_an_exec_hides_the_values_it_passed(tmp_path: Path) -> None:
    seen: list[Mapping[str, str]] = []

    def runner(argv: Sequence[str], env: Mapping[str, str], timeout: float) -> Completed:
        seen.append(env)
        return Completed(1, "", "failed near a-longer-value and 7")

    ops = SkyOps(SkyCli(runner=runner))
    with pytest.raises(Exception) as caught:
        ops.exec("c", tmp_path / "task.json", {"TOKEN": "a-longer-value", "SEED": "7"})
    evidence = str(getattr(caught.value, "evidence", ""))
    assert "a-longer-value" not in evidence and "and 7" in evidence
    assert seen[0]["TOKEN"] == "a-longer-value" and seen[0]["SEED"] == "7"
