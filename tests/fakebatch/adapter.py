"""The test-only batch scheduler's adapter, written on the batch base: it supplies the submit,
query, classify and cancel commands (`qsys.py`); the remote attempt directory is the shared
reader's. `QSYS_ENTRY` registers it (`register(QSYS_ENTRY)`)."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from vibesys.adapters.base import JobRef, RemoteState, RemoteStatus, SubmitReceipt, SubmitRequest
from vibesys.adapters.batch.base import BatchBackend
from vibesys.adapters.registry import AdapterEntry
from vibesys.adapters.requests import AdapterRequest
from vibesys.adapters.rundir.claim import Claim, claim_shell
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


class QsysRequest(AdapterRequest):
    #: the batch system's state directory (its jobs, and the remote attempt directories under runs/)
    state: str = ""


class QsysDirs(RunDirReader):
    def __init__(self, state: Path) -> None:
        super().__init__(LocalTransport(), timeout=30.0, shares_filesystem=True)
        self._root = PurePosixPath(state / "runs")

    def root(self) -> PurePosixPath:
        return self._root


class QsysBackend(BatchBackend):
    name = "qsys"

    def __init__(self, state: Path, *, timeout: float = 30.0) -> None:
        self.state = state
        self.timeout = timeout
        self.dirs = QsysDirs(state)
        self.transport = LocalTransport()

    def _qsys(self, *args: str, maybe_effect: bool = False) -> str:
        argv = [sys.executable, str(QSYS), str(self.state), *args]
        result = self.transport.run(argv, timeout=self.timeout, maybe_effect=maybe_effect)
        if result.returncode != 0:
            raise BackendUnavailable(f"qsys {args[0]} failed", evidence=result.evidence())
        return result.stdout

    def submit(self, request: SubmitRequest[Any]) -> SubmitReceipt:
        remote = str(self.dirs.remote_attempt_dir(request.job_ref()))
        argv = ["sh", "-c", JOB_SCRIPT, "qsys-job", remote, *request.command]
        submit = ("submit", request.job_name, remote, "--", *argv)
        job_id = self._qsys(*submit, maybe_effect=True).strip()
        return SubmitReceipt(job_id, f"qsys submit {shlex.join(request.command)} -> {job_id}")

    def status(self, jobs: Sequence[JobRef]) -> dict[str, RemoteStatus]:
        rows: dict[str, tuple[str, str]] = {}
        for line in self._qsys("status").splitlines():
            job_id, name, word = line.split()
            rows[name] = (job_id, word)  # the latest job of a name wins
        markers = read_here({str(self.dirs.remote_attempt_dir(j)): j.job_name for j in jobs})
        return {j.job_name: self._classify(j, rows.get(j.job_name), markers) for j in jobs}

    def _classify(
        self, job: JobRef, row: tuple[str, str] | None, markers: Mapping[str, DirState]
    ) -> RemoteStatus:
        found = markers.get(job.job_name, NO_MARKERS)
        claim, code = found.claim, found.exit_code
        job_id, word = row if row else (job.job_id, "")
        seen = f"qsys: {job_id} {word or 'unknown'}"
        if word == "running":
            return RemoteStatus(job.job_name, job_id, RemoteState.RUNNING, observation=seen)
        if code is not None:
            state = RemoteState.COMPLETED if code == 0 else RemoteState.FAILED
            return RemoteStatus(job.job_name, job_id, state, code, observation=seen, final=True)
        if word == "cancelled" or (word and (job.attempt_dir / CANCEL_FILE).exists()):
            by = "vibesys" if (job.attempt_dir / CANCEL_FILE).exists() else None
            return RemoteStatus(
                job.job_name, job_id, RemoteState.CANCELLED, cancelled_by=by, observation=seen
            )
        if word == "ended" and claim is not None and claim.kind == "job":
            return RemoteStatus(job.job_name, job_id, RemoteState.FAILED, observation=seen)
        # Unknown to qsys, or a job that refused its fenced attempt: the claim says the rest.
        return RemoteStatus(
            job.job_name, None, RemoteState.NOT_FOUND, observation=seen, claim=claim
        )

    def cancel(self, job: JobRef) -> None:
        job.attempt_dir.mkdir(parents=True, exist_ok=True)
        (job.attempt_dir / CANCEL_FILE).touch()
        self._qsys("cancel", job.job_name)

    def fence(self, job: JobRef, text: str) -> Claim:
        claim, out = self.dirs.write_fence(job, text)
        if claim is None:
            raise BackendUnavailable("fence: no readable claim", evidence=out[:500])
        if claim.fenced:
            self._qsys("cancel", job.job_name)
        return claim

    def collect(self, job: JobRef) -> str:
        marker = Path(str(self.dirs.remote_attempt_dir(job)), EXIT_CODE_FILE)
        return f"marker: {marker.read_text().strip()}" if marker.exists() else "no marker"

    def poll_interval(self, age_seconds: float) -> float:
        return 0.05


#: The registry's names for this adapter's request model and request builder.
Request = QsysRequest


def make_request(adapter: str, values: Mapping[str, Any]) -> QsysRequest:
    return QsysRequest(state=str(values.get("state") or ""))


def build(request: QsysRequest) -> QsysBackend:
    return QsysBackend(Path(request.state))


QSYS_ENTRY = AdapterEntry("qsys", "a test-only batch scheduler", "tests.fakebatch.adapter")
