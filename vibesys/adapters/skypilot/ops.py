"""SkyPilot's control-plane commands, each run once through `SkyCli`, read with `parse`, and
turned into a typed result or a typed error. The output facts behind each mapping are in
`tests/data/sky/README.md` (captured from the real 0.14.1).

- `status -o json [--refresh] N`: the record, or absent (gone); rc≠0 → SkyCommandFailed.
- `launch -y -d -c N TASK`: rc 0 = the allocation is ready; ResourcesMismatch →
  ClusterIncompatible; Slurm's refusal of the sbatch (its words, e.g. "Requested time limit
  is invalid") → LaunchRefused; otherwise SkyCommandFailed with maybe_submitted.
- `exec -d [--secret NAME...] N TASK`: the id from "Job submitted, ID: N"; ClusterDoesNotExist
  → ClusterGone (nothing ran); otherwise SkyCommandFailed with maybe_submitted.
- `queue N -o json`: the jobs, or `{}` when it could not ask (rc 0 even then; with a refused
  ssh in its stderr, CredentialRefused: the cluster is not known gone).
- `cancel -y N ID`: rc 2 "does not exist" → ClusterGone.
- `down -y N`: rc 0 also for an unknown cluster.

Any of them failing because its ssh to the login node was refused ("Permission denied
(publickey)", "Authentication failed": an expired certificate, a key no longer accepted) is
CredentialRefused, with the command's own maybe_submitted: never a lost transport to retry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from vibesys.adapters.skypilot.boundary import Completed, SkyCli
from vibesys.adapters.skypilot.errors import (
    ClusterGone,
    ClusterIncompatible,
    LaunchRefused,
    SkyCommandFailed,
    SkyMalformedOutput,
)
from vibesys.adapters.skypilot.parse import (
    ClusterRecord,
    QueueJob,
    parse_job_id,
    parse_queue,
    parse_status,
    strip_ansi,
)
from vibesys.adapters.slurm.limits import slurm_refusal
from vibesys.adapters.transports.ssh_errors import refused_login
from vibesys.errors import BackendError

__all__ = ["SkyOps"]

_DOES_NOT_EXIST: Final = re.compile(r"ClusterDoesNotExist|Cluster '[^']*' does not exist")
_MISMATCH: Final = re.compile(r"ResourcesMismatchError|Requested resources do not match")
#: OpenSSH's words when the login node refuses the login (sshconnect2.c), as SkyPilot's own
#: command runner reads them; the methods in parentheses keep a file's EACCES out.
_LOGIN_REFUSED: Final = re.compile(r"Permission denied \([a-z,-]+\)|Authentication failed")
#: API request names that may still add a job to a cluster.
_SUBMITTING: Final = ("sky.exec", "sky.launch")


class SkyOps:
    def __init__(
        self,
        cli: SkyCli,
        *,
        launch_timeout: float = 1800.0,
        identity: Callable[[], str | None] | None = None,
    ) -> None:
        self.cli = cli
        self.launch_timeout = launch_timeout
        #: the login node's identity file (its certificate is named when a login is refused)
        self.identity = identity

    def _fail(
        self,
        what: str,
        args: Sequence[str],
        done: Completed,
        hide: Sequence[str] = (),
        *,
        maybe_submitted: bool = False,
    ) -> BackendError:
        evidence = self.cli.evidence(args, done, hide)
        if _LOGIN_REFUSED.search(strip_ansi(done.stdout + done.stderr)):
            identity = self.identity() if self.identity is not None else None
            return refused_login(
                f"{what} (SkyPilot's ssh to the login node)",
                identity=identity,
                evidence=evidence,
                maybe_submitted=maybe_submitted,
            )
        return SkyCommandFailed(
            f"{what} failed (rc {done.returncode})",
            returncode=done.returncode,
            evidence=evidence,
            maybe_submitted=maybe_submitted,
        )

    def status(self, name: str, *, refresh: bool) -> ClusterRecord | None:
        """The cluster's record, or None when SkyPilot has none (never launched, torn down, or
        its allocation found gone by this refresh). Without refresh an ended allocation may
        still read UP."""
        args = ["status", "-o", "json", *(["--refresh"] if refresh else []), name]
        done = self.cli.run(args)
        if done.returncode != 0:
            raise self._fail("sky status", args, done)
        found = [record for record in parse_status(done.stdout) if record.name == name]
        return found[0] if found else None

    def launch(self, name: str, task_file: Path) -> str:
        """Create the cluster, or bring an existing one up (provisioning is idempotent: a
        pending or running allocation of that name is reused). Returns evidence."""
        args = ["launch", "-y", "-d", "-c", name, str(task_file)]
        done = self.cli.run(args, timeout=self.launch_timeout, maybe_effect=True)
        if done.returncode != 0:
            text = strip_ansi(done.stdout + done.stderr)
            if _MISMATCH.search(text):
                raise ClusterIncompatible(
                    f"cluster {name} exists with other resources",
                    evidence=self.cli.evidence(args, done),
                )
            refusal = slurm_refusal(text)
            if refusal is not None:
                # The request's fault, proven by Slurm's own words: SkyPilot tears down what
                # it made of a failed launch, and asking again gets the same answer.
                said = f"Slurm refused the allocation of cluster {name}: {refusal}"
                raise LaunchRefused(
                    said,
                    evidence=f"{said}; {self.cli.evidence(args, done)}",
                    fix="fix what Slurm refuses in the profile (allocation_time, infra's "
                    "partition) or in SkyPilot's sbatch_options; `vibesys check --profile` "
                    "compares the time with the partitions' limits",
                )
            raise self._fail("sky launch", args, done, maybe_submitted=True)
        return self.cli.evidence(args, done)

    def down(self, name: str) -> str:
        args = ["down", "-y", name]
        done = self.cli.run(args, timeout=self.launch_timeout)
        if done.returncode != 0:
            raise self._fail("sky down", args, done)
        return self.cli.evidence(args, done)

    def exec(
        self, name: str, task_file: Path, passed: Mapping[str, str] | None = None
    ) -> tuple[int, str]:
        """Submit a task to the cluster (detached); the job id and evidence. `passed`: the
        variables the job gets, as secrets whose values SkyPilot reads from its own
        environment (never on a command line or in the task file; SkyPilot redacts them)."""
        passed = passed or {}
        flags = [word for key in sorted(passed) for word in ("--secret", key)]
        args = ["exec", "-d", *flags, name, str(task_file)]
        done = self.cli.run(args, maybe_effect=True, env=passed)
        # A value of a few characters ("1") is no secret, and hiding it would blank the
        # evidence's own numbers.
        hide = [value for value in passed.values() if len(value) >= 4]
        evidence = self.cli.evidence(args, done, hide)
        if done.returncode != 0:
            if _DOES_NOT_EXIST.search(strip_ansi(done.stderr)):
                raise ClusterGone(f"cluster {name} does not exist", evidence=evidence)
            raise self._fail("sky exec", args, done, hide, maybe_submitted=True)
        try:
            return parse_job_id(done.stdout), evidence
        except SkyMalformedOutput as exc:
            raise SkyMalformedOutput(str(exc), evidence=evidence, maybe_submitted=True) from None

    def queue(self, name: str) -> list[QueueJob] | None:
        """The cluster's jobs (newest first), or None when SkyPilot could not ask (the cluster
        is unknown, or its allocation is gone)."""
        args = ["queue", name, "-o", "json"]
        done = self.cli.run(args)
        if done.returncode != 0:
            raise self._fail("sky queue", args, done)
        jobs = parse_queue(done.stdout, name)
        if jobs is None and _LOGIN_REFUSED.search(strip_ansi(done.stderr)):
            # `{}` because its ssh was refused says nothing of the cluster: never "gone".
            raise self._fail("sky queue", args, done)
        return jobs

    def cancel(self, name: str, job_id: int) -> str:
        args = ["cancel", "-y", name, str(job_id)]
        done = self.cli.run(args)
        evidence = self.cli.evidence(args, done)
        if done.returncode != 0:
            if _DOES_NOT_EXIST.search(strip_ansi(done.stderr)):
                raise ClusterGone(f"cluster {name} does not exist", evidence=evidence)
            raise self._fail("sky cancel", args, done)
        return evidence

    def submitting_requests(self) -> list[str]:
        """Ids of active API requests that may still add a job to a cluster (an exec whose
        client died lives on in the API server). 0.14.1's server ignores `-c CLUSTER` (it says
        so and names no cluster in its rows), so this counts every cluster's."""
        args = ["api", "status", "-o", "json"]
        done = self.cli.run(args)
        if done.returncode != 0:
            raise self._fail("sky api status", args, done)
        text = strip_ansi(done.stdout)
        start = min((i for i in (text.find("["), text.find("{")) if i >= 0), default=-1)
        if start < 0:
            raise SkyMalformedOutput(f"sky api status: no JSON: {text[:200]!r}")
        try:
            data, _ = json.JSONDecoder().raw_decode(text[start:])
        except json.JSONDecodeError:
            raise SkyMalformedOutput(f"sky api status: invalid JSON: {text[:200]!r}") from None
        rows = data if isinstance(data, list) else data.get("requests", [])
        return [
            str(row.get("request_id", "?"))
            for row in rows
            if isinstance(row, dict)
            and str(row.get("name", "")).startswith(_SUBMITTING)
            and str(row.get("status", "")).upper() in ("PENDING", "RUNNING")
        ]

    def helper(self, *args: str) -> dict[str, Any]:
        """Run the SDK helper; its JSON answer (ok) or SkyCommandFailed naming its error."""
        done = self.cli.run(list(args), helper=True)
        try:
            answer = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
        except json.JSONDecodeError:
            answer = {}
        if not isinstance(answer, dict) or "ok" not in answer:
            raise SkyMalformedOutput(f"sdk helper {args[0]}: {self.cli.evidence(args, done)}")
        if not answer["ok"]:
            raise self._fail(f"sdk helper {args[0]} ({answer.get('error')})", args, done)
        return answer
