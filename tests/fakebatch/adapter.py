"""The test-only batch scheduler's adapter, written on the batch template: it supplies the
submit, query, classify and cancel commands (`qsys.py`); the base does the rest (the fence, the
collection, the remote attempt directory's files). `QSYS_ENTRY` registers it
(`register(QSYS_ENTRY)`)."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from msgspec import Struct

from vibesys.adapters.base import JobRef, RemoteState, RemoteStatus, Submission, SubmitReceipt
from vibesys.adapters.batch.base import BatchBackend
from vibesys.adapters.registry import AdapterEntry
from vibesys.adapters.requests import AdapterRequest
from vibesys.adapters.rundir.claim import claim_shell
from vibesys.adapters.rundir.markers import NO_MARKERS, DirState, read_here
from vibesys.adapters.rundir.names import CANCEL_FILE, EXIT_CODE_FILE
from vibesys.adapters.rundir.reader import RunDirReader
from vibesys.adapters.transports import LocalTransport
from vibesys.errors import BackendUnavailable

QSYS = Path(__file__).with_name("qsys.py")

#: `sh -c JOB_SCRIPT qsys-job ATTEMPT_DIR ARGV...`: claim the attempt, run ARGV, leave its status.
JOB_SCRIPT = (
    'd=$1; shift\ncd "$d"\n'
    + claim_shell("d", {"qsys_job_id": '"${QSYS_JOB_ID:-}"'})
    + '"$@"; rc=$?\n'
    + f'printf "%s\\n" "$rc" > "$d/{EXIT_CODE_FILE}.tmp" && '
    + f'mv "$d/{EXIT_CODE_FILE}.tmp" "$d/{EXIT_CODE_FILE}"\n'
    + 'exit "$rc"\n'
)


class QsysRequest(AdapterRequest, frozen=True, kw_only=True):
    #: the batch system's state directory (its jobs, and the remote attempt directories under runs/)
    state: str = ""


class QsysDirs(RunDirReader):
    def __init__(self, state: Path) -> None:
        super().__init__(LocalTransport(), timeout=30.0, shares_filesystem=True)
        self._root = PurePosixPath(state / "runs")

    def root(self) -> PurePosixPath:
        return self._root


class QsysRound(Struct, frozen=True):
    """One status round: qsys's latest (job id, state word) of each name, and the markers."""

    rows: dict[str, tuple[str, str]]
    markers: dict[str, DirState]


class QsysBackend(BatchBackend):
    name = "qsys"

    def __init__(self, state: Path, *, timeout: float = 30.0) -> None:
        super().__init__(QsysDirs(state))
        self.state = state
        self.timeout = timeout
        self.transport = LocalTransport()

    def _qsys(self, *args: str, maybe_effect: bool = False) -> str:
        argv = [sys.executable, str(QSYS), str(self.state), *args]
        result = self.transport.run(argv, timeout=self.timeout, maybe_effect=maybe_effect)
        if result.returncode != 0:
            raise BackendUnavailable(f"qsys {args[0]} failed", evidence=result.evidence())
        return result.stdout

    # -- the scheduler's side, on the batch template ----------------------------------------

    def submit(self, submission: Submission[Any]) -> SubmitReceipt:
        remote = str(self.dirs.remote_attempt_dir(submission.job_ref()))
        argv = ["sh", "-c", JOB_SCRIPT, "qsys-job", remote, *submission.command]
        submit = ("submit", submission.job_name, remote, "--", *argv)
        job_id = self._qsys(*submit, maybe_effect=True).strip()
        return SubmitReceipt(job_id, f"qsys submit {shlex.join(submission.command)} -> {job_id}")

    def _query(self, jobs: Sequence[JobRef]) -> QsysRound:
        rows: dict[str, tuple[str, str]] = {}
        for line in self._qsys("status").splitlines():
            job_id, name, word = line.split()
            rows[name] = (job_id, word)  # the latest job of a name wins
        markers = read_here({str(self.dirs.remote_attempt_dir(j)): j.job_name for j in jobs})
        return QsysRound(rows, markers)

    def _classify(self, job: JobRef, seen: QsysRound) -> RemoteStatus:
        found = seen.markers.get(job.job_name, NO_MARKERS)
        claim, code = found.claim, found.exit_code
        row = seen.rows.get(job.job_name)
        job_id, word = row if row else (job.job_id, "")
        said = f"qsys: {job_id} {word or 'unknown'}"
        if word == "running":
            return RemoteStatus(job.job_name, job_id, RemoteState.RUNNING, observation=said)
        if code is not None:
            state = RemoteState.COMPLETED if code == 0 else RemoteState.FAILED
            return RemoteStatus(job.job_name, job_id, state, code, observation=said, final=True)
        if word == "cancelled" or (word and (job.attempt_dir / CANCEL_FILE).exists()):
            by = "vibesys" if (job.attempt_dir / CANCEL_FILE).exists() else None
            return RemoteStatus(
                job.job_name, job_id, RemoteState.CANCELLED, cancelled_by=by, observation=said
            )
        if word == "ended" and claim is not None and claim.kind == "job":
            return RemoteStatus(job.job_name, job_id, RemoteState.FAILED, observation=said)
        # Unknown to qsys, or a job that refused its fenced attempt: the claim says the rest.
        return RemoteStatus(
            job.job_name, None, RemoteState.NOT_FOUND, observation=said, claim=claim
        )

    def _cancel_queued(self, job: JobRef) -> None:
        self._qsys("cancel", job.job_name)

    def poll_interval(self, age_seconds: float) -> float:
        return 0.05


#: The registry's names for this adapter's request model and request builder.
Request = QsysRequest


def make_request(adapter: str, values: Mapping[str, Any]) -> QsysRequest:
    return QsysRequest(state=str(values.get("state") or ""))


def build(request: QsysRequest) -> QsysBackend:
    return QsysBackend(Path(request.state))


QSYS_ENTRY = AdapterEntry("qsys", "a test-only batch scheduler", "tests.fakebatch.adapter")
