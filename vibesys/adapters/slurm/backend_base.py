"""What the sbatch and srun backends do alike: everything but submitting. The batch base reads
the remote attempt directories; the Slurm scheduler (`scheduler.py`) answers the rest."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from vibesys.adapters.base import GatheredCollection, JobRef, PollSchedule, RemoteStatus, Sink
from vibesys.adapters.batch.base import BatchBackend
from vibesys.adapters.rundir.claim import Claim
from vibesys.adapters.slurm.scheduler import SlurmScheduler

__all__ = ["SlurmBackendBase"]


class SlurmBackendBase(BatchBackend):
    """A Slurm backend: its scheduler queries, cancels and fences; submitting is the
    subclass's (sbatch or srun)."""

    scheduler: SlurmScheduler

    # -- what the engine may ask of it (adapters.base.Backend) ---------------------------

    def gathers_collection(self) -> SlurmBackendBase:
        return self

    def shared_polling(self) -> SlurmBackendBase:
        return self

    def __init__(self, scheduler: SlurmScheduler) -> None:
        self.scheduler = scheduler
        self.dirs = scheduler.dirs

    def status(self, jobs: Sequence[JobRef]) -> dict[str, RemoteStatus]:
        return self.scheduler.status(jobs)

    def cancel(self, job: JobRef) -> None:
        self.scheduler.cancel(job)

    def collect(self, job: JobRef) -> str:
        return self.scheduler.collect(job)

    def gather_collection(
        self,
        job: JobRef,
        offsets: Mapping[str, int],
        patterns: Sequence[str],
        sinks: Mapping[str, Sink],
    ) -> GatheredCollection | None:
        return self.scheduler.gather_collection(job, offsets, patterns, sinks)

    def poll_interval(self, age_seconds: float) -> float:
        return self.scheduler.poll_interval(age_seconds)

    def fence(self, job: JobRef, text: str) -> Claim:
        return self.scheduler.fence(job, text)

    def poll_site(self) -> str:
        return self.scheduler.poll_site()

    def site_facts(self) -> dict[str, str]:
        return self.scheduler.site_facts()

    def poll_schedule(self, facts: Mapping[str, str]) -> PollSchedule:
        return self.scheduler.poll_schedule(facts)
