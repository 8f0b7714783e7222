"""The adapter protocol. Adapters do side effects and speak their own vocabulary (RemoteState);
they never import the journal or the engine. `engine.observe` maps RemoteStatus to events.

Every adapter's job wrapper claims its attempt before the command starts
(`adapters.rundir.claim`), and every adapter can fence an attempt: absence is proven by a fence,
never by silence."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

from msgspec import Struct, field

from vibesys.adapters.rundir.claim import Claim
from vibesys.osutil.artifact_walk import Limits

if TYPE_CHECKING:
    from vibesys.adapters.leases import LeasingBackend


class RemoteState(StrEnum):
    PENDING = "PENDING"  # queued, held, configuring: not yet running
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"  # ended on its own, exit_code says how
    FAILED = "FAILED"  # ended on its own with a non-zero exit or a signal
    CANCELLED = "CANCELLED"  # cancelled; `cancelled_by` says by whom when known
    TIMEOUT = "TIMEOUT"  # hit its own time limit
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    NODE_FAIL = "NODE_FAIL"
    BOOT_FAIL = "BOOT_FAIL"
    PREEMPTED = "PREEMPTED"
    LAUNCH_FAILED = "LAUNCH_FAILED"
    ALLOCATION_EXPIRED = "ALLOCATION_EXPIRED"  # the allocation it ran in ended under it
    #: ended by the scheduler before it started: the job it waited on failed
    DEPENDENCY_NEVER_SATISFIED = "DEPENDENCY_NEVER_SATISFIED"
    NOT_FOUND = "NOT_FOUND"  # the scheduler answered and knows no such job (silence, not proof)
    UNKNOWN = "UNKNOWN"  # cannot tell; never read as success or failure


TERMINAL_REMOTE = frozenset(RemoteState) - {
    RemoteState.PENDING,
    RemoteState.RUNNING,
    RemoteState.NOT_FOUND,
    RemoteState.UNKNOWN,
}


class JobRef(Struct, frozen=True):
    """What the engine knows of one attempt: enough to find it again after a crash."""

    job_name: str
    job_id: str | None
    attempt_dir: Path
    #: when the intent to submit was committed: lookups by name search from here on
    intended_at: datetime | None = None
    invocation_id: str = ""
    attempt: int = 0
    #: the artifacts' limits its request recorded (None: the defaults)
    artifact_limits: Limits | None = None


#: Covariant: frozen, so a request of a subclass is a request of its base.
R = TypeVar("R", covariant=True)


class JobContext(Struct, frozen=True):
    """Where and with what environment the command runs, recorded at PREPARED: every attempt
    gets exactly this, whichever process submits it."""

    cwd: str
    env: Mapping[str, str] = field(default_factory=dict)


class Submission(Struct, Generic[R], frozen=True):
    """One attempt to submit: what every adapter gets, plus its own typed `request`."""

    invocation_id: str
    attempt: int
    job_name: str
    command: Sequence[str]
    attempt_dir: Path
    context: JobContext
    request: R
    #: the parent's job this submission waits on (Slurm's afterok), as the engine found it
    #: now; None: it waits on nothing
    after_job: str | None = None

    def job_ref(self) -> JobRef:
        """The attempt as the engine knows it before the scheduler gave it a job id."""
        return JobRef(self.job_name, None, self.attempt_dir, None, self.invocation_id, self.attempt)


class SubmitReceipt(Struct, frozen=True):
    job_id: str
    observation: str


class RemoteStatus(Struct, frozen=True):
    job_name: str
    job_id: str | None
    state: RemoteState
    #: the command's own exit status (0-255, or 128+N for death by signal N) when known
    exit_code: int | None = None
    #: who cancelled it, when the scheduler says ("vibesys" when we asked)
    cancelled_by: str | None = None
    #: the raw observation (a scheduler line, a marker's content, an error), kept as evidence
    observation: str = ""
    #: the attempt's claim, when the adapter read it (the scheduler did not show the job)
    claim: Claim | None = None
    #: waiting cannot change this observation (the process and its marker are gone for good)
    final: bool = False
    #: where and on what the attempt runs or ran, as far as this observation shows (site,
    #: partition, nodes, GPUs, start and end; a SkyPilot cluster, its allocation, ...)
    provenance: Mapping[str, str] = field(default_factory=dict)
    #: what the scheduler says of a queued or running job, for people (never decided by):
    #: its reason (`Resources`, `Priority`, `QOSMaxJobsPerUserLimit`), partition and nodes
    reason: str | None = None
    partition: str | None = None
    nodes: str | None = None
    #: CANCELLED, and the scheduler's record of the job shows it never got a node (it never
    #: started): what a cancel by no one named needs to be read as a dependency's kill
    never_started: bool = False


class Backend(Protocol):
    """A place jobs run. Every method may raise a `vibesys.errors.BackendError`."""

    name: str

    def submit(self, submission: Submission[Any]) -> SubmitReceipt:
        """Start the job under `submission.job_name`. SubmitRejected: proven nothing was submitted.
        BackendUnavailable: could not tell; `maybe_submitted` says whether it may have run."""
        ...

    def status(self, jobs: Sequence[JobRef]) -> dict[str, RemoteStatus]:
        """The state of every job, keyed by job name, in as few scheduler calls as possible.
        A job without a job id is looked up by name (NOT_FOUND only when proven absent)."""
        ...

    def cancel(self, job: JobRef) -> None:
        """Ask for cancellation (by id, or by name when no id was recorded). Idempotent; a
        repeated call may escalate (SIGTERM, then SIGKILL after a grace period)."""
        ...

    def fence(self, job: JobRef, text: str) -> Claim:
        """Claim the job's attempt directory with the fence `text` unless it is claimed
        already; return the claim that holds it now (a fence: the command can never start;
        the job's: it may run). Idempotent. Raises BackendError when it cannot tell."""
        ...

    def collect(self, job: JobRef) -> str:
        """Bring logs and results of a finished job home; return what was done, as evidence."""
        ...

    def log_paths(self, job: JobRef) -> tuple[Path, Path]:
        """Local files holding the job's stdout and stderr as far as they are known."""
        ...

    def poll_interval(self, age_seconds: float) -> float:
        """Seconds to wait between status rounds for a job this old."""
        ...

    # -- optional capabilities: the engine asks; an adapter that has one returns itself ------

    def remote_files(self) -> RemoteFiles | None:
        """Its logs and artifacts are read where the job ran; None: nothing to read there."""
        return None

    def gathers_collection(self) -> GathersCollection | None:
        """It brings a whole collection home in one command; None: the usual way."""
        return None

    def shared_polling(self) -> SharedPolling | None:
        """Its status rounds are shared per site (a scheduler's); None: asked per job."""
        return None

    def sees_its_own_end(self) -> SeesItsOwnEnd | None:
        """This process sees its jobs end (it started them); None: the rounds say."""
        return None

    def leasing(self) -> LeasingBackend | None:
        """It runs its jobs in an allocation it leases itself; None: it holds none."""
        return None

    def shows_progress(self) -> ShowsProgress | None:
        """It reports its transfers to a `Progress`; None: it has none to report."""
        return None


class ArtifactInfo(Struct, frozen=True):
    """One file the remote side reports for a declared artifact pattern."""

    path: str  # relative to the job's working directory (or the pattern a stopped walk left)
    size: int
    sha256: str
    #: why it is not collected (over a limit, the walk stopped): nothing is downloaded
    refused: str = ""


class Sink(Protocol):
    """Where streamed output goes: a binary file, or anything that writes bytes."""

    def write(self, data: bytes, /) -> object: ...

    def flush(self) -> None: ...


@runtime_checkable
class RemoteFiles(Protocol):
    """Adapters whose job files live elsewhere: logs are copied home by byte offset, declared
    artifacts are listed with their digests and downloaded one by one."""

    def read_log(self, job: JobRef, stream: str, offset: int, sink: Sink) -> int:
        """Append the bytes of log `stream` (stdout or stderr) from `offset` to `sink`; return
        how many. A log that does not exist yet has 0 bytes."""
        ...

    def list_artifacts(
        self, job: JobRef, patterns: Sequence[str]
    ) -> tuple[list[ArtifactInfo], list[str]]:
        """The files matching `patterns` (relative globs) with size and sha256, and the
        patterns nothing matched."""
        ...

    def fetch_artifact(self, job: JobRef, path: str, sink: Sink) -> None:
        """Copy one listed artifact's bytes into `sink`."""
        ...


class GatheredCollection(Struct, frozen=True):
    """A collection brought home in one command: how many bytes of each log arrived (into
    the sinks given), the marker's record (as `Backend.collect` gives it), and the listing of
    the declared artifacts (None when none were declared)."""

    log_bytes: Mapping[str, int]
    evidence: str
    listing: tuple[list[ArtifactInfo], list[str]] | None


@runtime_checkable
class GathersCollection(Protocol):
    """Adapters that can bring a whole collection home in one command (a remote round trip
    each saved): the logs from their offsets, the marker and the artifacts' listing."""

    def gather_collection(
        self,
        job: JobRef,
        offsets: Mapping[str, int],
        patterns: Sequence[str],
        sinks: Mapping[str, Sink],
    ) -> GatheredCollection | None:
        """Write each log's bytes from its offset to its sink and return what came; None
        when collecting the usual way costs nothing more here (the files are this host's)."""
        ...


class PollSchedule(Struct, frozen=True):
    """How often a site's shared status round may run (seconds). The round after one that
    watched jobs no older than `age` is due `interval(age)` later; never sooner than `floor`
    after the last one. Between rounds the cheap `probe` runs every `probe` seconds; an end it
    finds makes the next round due `settle` later (at once when no other job still runs), and
    each further end `settle` after it, at most `settle_max` after the first."""

    floor: float
    initial: float
    maximum: float
    backoff: float
    probe: float
    #: why the floor is what it is (the site's RPC rate limit, when it set it), for people
    why: str = ""
    #: how long after a probe finds an end the confirming round waits for the other watched
    #: jobs, still running, to end too (each further end found waits this long again)
    settle: float = 0.0
    #: the longest the confirming round waits after the first end found since the last round
    settle_max: float = 0.0

    def interval(self, age: float) -> float:
        """Waiting a fixed fraction of the youngest job's age grows the delay geometrically
        with no state kept: new jobs are seen quickly, old ones cost the scheduler little."""
        grown = max(age, 0.0) * (self.backoff - 1.0)
        return max(self.floor, min(self.maximum, max(self.initial, grown)))


@runtime_checkable
class SharedPolling(Protocol):
    """A backend whose status calls load a scheduler that every process on this host shares
    (Slurm's controller). The engine then runs one status round per site and interval for all
    of them (`engine/shared_poll.py`), reading the site's facts once."""

    def status(self, jobs: Sequence[JobRef]) -> dict[str, RemoteStatus]:
        """As `Backend.status`."""
        ...

    def poll_site(self) -> str:
        """Which scheduler (and file layout) the status calls reach: backends with the same
        site answer `status` alike, so one of them may ask for all."""
        ...

    def site_facts(self) -> dict[str, str]:
        """What the site's configuration says about polling it (read once per site and kept
        in the journal): its RPC rate limits, for example. Raises BackendError."""
        ...

    def poll_schedule(self, facts: Mapping[str, str]) -> PollSchedule:
        """The schedule for this site, from the configuration and the site's `facts`."""
        ...

    def probe(self, jobs: Sequence[JobRef]) -> set[str]:
        """The names of `jobs` whose end marker exists: cheap, no scheduler request. A job
        found here is worth a status round now. Raises BackendError."""
        ...


class Waitable(Protocol):
    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


@runtime_checkable
class SeesItsOwnEnd(Protocol):
    """A backend whose job runs under a process this one started and waits for (srun: the job
    step ends with it). Its end is seen when that process ends, not at the next poll."""

    def end_signal(self, job: JobRef) -> Waitable | None:
        """Set when this process's own process for `job` has ended; None when this process
        started none (another process submitted the attempt)."""
        ...

    def ended_here(self, job: JobRef) -> RemoteStatus | None:
        """The job's end, once that process has ended and the job left the proof of it (its
        claim and its exit marker); None otherwise (the status rounds decide then)."""
        ...


class Progress(Protocol):
    """Hears how a transfer goes (a stage, an artifact download) for people: a progress bar
    on a terminal, nothing elsewhere. Never decided by."""

    def begin(self, label: str, total: int) -> None: ...

    def advance(self, count: int) -> None: ...

    def end(self) -> None: ...


@runtime_checkable
class ShowsProgress(Protocol):
    """An adapter that can report its transfers to a `Progress` (set by the engine)."""

    progress: Progress | None
