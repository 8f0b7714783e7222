"""The sbatch adapter: the trusted evaluation path. Every job is named before it is submitted
(`--job-name=<stable name>`), never requeued by Slurm, claims its attempt before its command
starts, and is found again by that name (or its claim).

A submission is one remote command (`_SUBMIT`): check that the candidate's snapshot is staged
and that a partition the job may use allows its time, create the remote attempt directory,
write the batch script from stdin, and exec sbatch. Only
when the snapshot is missing does the stage run (its uploads), and the command again without the
check. Over SSH that is one round trip."""

from __future__ import annotations

import shlex
import threading
import time
from pathlib import PurePosixPath
from typing import Final

from vibesys.adapters import staging
from vibesys.adapters.base import Progress, Submission, SubmitReceipt
from vibesys.adapters.rundir.names import WORK_DIR
from vibesys.adapters.slurm.backend import SlurmBackend
from vibesys.adapters.slurm.limits import (
    BatchTime,
    batch_time,
    parse_partition_limits,
    time_refusal,
)
from vibesys.adapters.slurm.parse import parse_sbatch_parsable
from vibesys.adapters.slurm.request import SbatchRequest, SlurmRequestBase, make_request
from vibesys.adapters.slurm.script import (
    SCRIPT_FILE,
    render_sbatch,
    sbatch_argv,
)
from vibesys.adapters.slurm.submission import (
    REJECTIONS,
    Candidate,
    candidate_setup,
    job_spec,
)
from vibesys.adapters.transports import CommandResult, Runner
from vibesys.adapters.transports.configured import prewarm as prewarm_transport
from vibesys.adapters.transports.configured import runner_from_config
from vibesys.config.slurm import SlurmSiteConfig
from vibesys.errors import BackendError, BackendMisconfigured, BackendUnavailable, SubmitRejected

#: `sh -c _SUBMIT vibesys-submit WORK SCRIPT PYTHON VERIFY SNAPSHOT DIGEST MINUTES PARTITIONS
#: FITS SBATCH...`, the batch script on stdin. With PYTHON set, the snapshot is probed first; when
#: it is not staged the command says so last on stderr (PROBE_SAID) and exits PROBE_BASE + the
#: probe's status (3: absent, 86: not verified) having submitted nothing. With MINUTES set, sinfo
#: is asked and FITS judges them against the partitions (comma-separated; none: the default):
#: proven too long, the command prints LIMITS_SAID and sinfo's answer on stderr and exits
#: OVER_LIMITS having submitted nothing, as it does with CANNOT_WRITE; sinfo failing is said
#: (LIMITS_UNKNOWN) and leaves it to sbatch; otherwise it is sbatch's answer (whose own status
#: may be 100 or more: never read as a probe).
_SUBMIT = """set -u
work=$1 script=$2 python=$3 verify=$4 final=$5 digest=$6 minutes=$7 partitions=$8 fits=$9
shift 9
if [ -n "$python" ]; then
  "$python" -I -c "$verify" --probe "$final" "$digest"
  rc=$?
  if [ "$rc" -ne 0 ]; then
    [ "$rc" -gt 150 ] && rc=150
    echo "vibesys-submit: snapshot not staged ($rc)" >&2
    exit $((100 + rc))
  fi
fi
if [ -n "$minutes" ]; then
  limits=$(sinfo -h -o '%P %l' 2>/dev/null) || {
    limits=
    echo "vibesys-submit: partition limits unknown" >&2
  }
  if ! printf '%s\n' "$limits" | awk -v want="$minutes" -v targets="$partitions" "$fits"; then
    printf 'vibesys-submit: over the partition limits\n%s\n' "$limits" >&2
    exit 98
  fi
fi
if ! { mkdir -p -- "$work" && cat > "$script"; }; then
  echo "vibesys-submit: cannot write $script" >&2
  exit 97
fi
exec "$@"
"""
#: awk over `sinfo -h -o '%P %l'`: exit 1 only when the time (minutes) is proven to fit none
#: of the target partitions, by the rules of `limits.time_refusal`: every target listed with a
#: time limit (`n/a` is none), each too short; a line it cannot read proves nothing. The
#: smaller of a partition's limits counts (a partition over several lines); `-1` is unlimited.
FITS = r"""
function minutes(t,   n, p, d, s) {
  if (tolower(t) == "infinite" || tolower(t) == "unlimited") return -1
  d = 0
  if (index(t, "-")) {
    d = substr(t, 1, index(t, "-") - 1); t = substr(t, index(t, "-") + 1)
    n = split(t, p, ":")
    s = d * 86400 + p[1] * 3600 + (n > 1 ? p[2] * 60 : 0) + (n > 2 ? p[3] : 0)
  } else {
    n = split(t, p, ":")
    if (n == 3) s = p[1] * 3600 + p[2] * 60 + p[3]
    else if (n == 2) s = p[1] * 60 + p[2]
    else s = p[1] * 60
  }
  return int(s / 60)
}
NF == 0 { next }
{
  name = $1
  if (name ~ /\*$/) { sub(/\*$/, "", name); if (dflt == "") dflt = name }
  if (NF != 2 || name == "") { unread = 1; next }
  if (tolower($2) == "n/a") next
  if (tolower($2) != "infinite" && tolower($2) != "unlimited" && \
      $2 !~ /^[0-9]+(-[0-9]+)?(:[0-9]+)?(:[0-9]+)?$/) { unread = 1; next }
  m = minutes($2)
  if (!(name in limit) || limit[name] == -1 || (m != -1 && m < limit[name])) limit[name] = m
}
END {
  if (unread) exit 0
  n = split(targets, target, ",")
  if (n == 0) { if (dflt == "") exit 0; target[1] = dflt; n = 1 }
  for (i = 1; i <= n; i++) if (!(target[i] in limit)) exit 0
  for (i = 1; i <= n; i++) if (limit[target[i]] == -1 || want + 0 <= limit[target[i]]) exit 0
  exit 1
}
"""
CANNOT_WRITE = 97
OVER_LIMITS = 98
LIMITS_SAID = "vibesys-submit: over the partition limits"
LIMITS_UNKNOWN = "vibesys-submit: partition limits unknown"
#: How long a time that sinfo showed to fit is taken as fitting, by every later submission of
#: this process to the same site and partitions, without asking again: limits change rarely,
#: and each sinfo is one more slurmctld RPC beside sbatch's own (32 jobs submitted at once
#: asked it 32 times). A limit lowered meanwhile leaves such a job pending, with the reason
#: Slurm gives (PartitionTimeLimit), which the status rounds report.
FIT_SECONDS: Final = 60.0


class FitsSeen:
    """The (site, minutes, partitions) that sinfo showed to fit, each until FIT_SECONDS
    after (the monotonic clock); shared by the submissions of this process."""

    def __init__(self) -> None:
        self._until: dict[tuple[str, int, tuple[str, ...]], float] = {}
        self._lock = threading.Lock()
        self.clock = time.monotonic

    def known(self, key: tuple[str, int, tuple[str, ...]]) -> bool:
        with self._lock:
            return self._until.get(key, 0.0) > self.clock()

    def record(self, key: tuple[str, int, tuple[str, ...]]) -> None:
        with self._lock:
            self._until[key] = self.clock() + FIT_SECONDS


FITS_SEEN: Final = FitsSeen()
PROBE_BASE = 100
PROBE_SAID = "vibesys-submit: snapshot not staged"


class SbatchBackend(SlurmBackend):
    name = "sbatch"

    # -- what the engine may ask of it (adapters.base.Backend) ---------------------------

    def shows_progress(self) -> SbatchBackend:
        return self

    def __init__(self, config: SlurmSiteConfig, runner: Runner | None = None) -> None:
        runner = runner or runner_from_config(config.slurm.transport)
        super().__init__(config, runner)
        #: hears of staging uploads (set by whoever shows them, a terminal's progress bar)
        self.progress: Progress | None = None

    def submit(self, submission: Submission[SlurmRequestBase]) -> SubmitReceipt:
        config = self.config.slurm
        asked = batch_time(
            submission.request.time_minutes, submission.request.partitions, config.sbatch_arguments
        )
        remote = self.dirs.remote_attempt_dir(submission.job_ref())
        spec = job_spec(submission, remote, config.sbatch_arguments)
        spec, candidate = candidate_setup(self, submission, spec)
        script = render_sbatch(spec)
        submission.attempt_dir.mkdir(parents=True, exist_ok=True)
        (submission.attempt_dir / SCRIPT_FILE).write_text(script)
        fit = None if asked is None else (self.poll_site(), asked.minutes, asked.partitions)
        if fit is not None and FITS_SEEN.known(fit):
            asked = None  # sinfo showed this time to fit a moment ago: not asked again
        code, out, err, evidence = self._submit_once(submission, remote, script, candidate, asked)
        if code >= PROBE_BASE and candidate is not None and _probe_said(err):
            # The snapshot is not staged: nothing was submitted. Stage it, then submit.
            probed = CommandResult(
                code - PROBE_BASE,
                "",
                err,
                tuple(staging.probe_argv(candidate.root, candidate.digest)),
            )
            staging.stage(
                candidate.manifest,
                candidate.path,
                self.runner,
                candidate.root,
                probed=probed,
                progress=self.progress,
            )
            code, out, err, evidence = self._submit_once(submission, remote, script, None, asked)
        if code == OVER_LIMITS and asked is not None and LIMITS_SAID in err:
            raise _over_limits(asked, err, submission.request.site_config)
        if code == CANNOT_WRITE and err.startswith("vibesys-submit:"):
            raise BackendUnavailable("could not write the batch script", evidence=evidence)
        if code == 0 and asked is not None and fit is not None and LIMITS_UNKNOWN not in err:
            FITS_SEEN.record(fit)
        if code == 0:
            try:
                job_id = parse_sbatch_parsable(out)
            except BackendUnavailable as exc:
                # sbatch said yes in words we do not read: it may well have queued the job.
                raise BackendUnavailable(str(exc), evidence=evidence, maybe_submitted=True) from exc
            return SubmitReceipt(job_id, evidence)
        if REJECTIONS.search(err):
            raise SubmitRejected(
                f"sbatch refused the job: {' '.join(err.split())}", evidence=evidence
            )
        # Anything else (a timeout, "Socket timed out", a busy controller) may still have
        # queued the job: only a lookup by name, or a fence, can tell.
        raise BackendUnavailable("sbatch failed", evidence=evidence, maybe_submitted=True)

    def _submit_once(
        self,
        submission: Submission[SlurmRequestBase],
        remote: PurePosixPath,
        script: str,
        candidate: Candidate | None,
        asked: BatchTime | None,
    ) -> tuple[int, str, str, str]:
        """The one remote command of a submission (see `_SUBMIT`)."""
        script_path = remote / SCRIPT_FILE
        probe = ["", "", "", ""]
        if candidate is not None:
            probe = [
                "python3",
                staging.verify_script(),
                str(candidate.snapshot_dir),
                candidate.digest,
            ]
        argv = [
            "sh",
            "-c",
            _SUBMIT,
            "vibesys-submit",
            str(remote / WORK_DIR),
            str(script_path),
            *probe,
            *_guard(asked),
            *sbatch_argv(script_path),
        ]
        code, out, err, _ = self._run(
            argv, input=script.encode(), maybe_effect=True, env=submission.context.env
        )
        # The evidence names what ran without the submit script and the verifier's source.
        evidence = f"{shlex.join(sbatch_argv(script_path))} -> rc={code}"
        if err.strip():
            evidence += f" stderr: {' '.join(err.split())[:500]}"
        return code, out, err, evidence


def build(request: SbatchRequest) -> SbatchBackend:
    return SbatchBackend(request.site())


def prewarm(request: SbatchRequest) -> None:
    """Start reaching the cluster (an SSH connection and its helper) while `vibesys run` still
    records the invocation: the first command then finds it ready."""
    prewarm_transport(request.site().slurm.transport)


def _guard(asked: BatchTime | None) -> tuple[str, str, str]:
    """The submit command's MINUTES PARTITIONS FITS: empty when the job asks no time."""
    if asked is None:
        return "", "", ""
    return str(asked.minutes), ",".join(asked.partitions), FITS


def _over_limits(
    asked: BatchTime, err: str, site_config: object
) -> SubmitRejected | BackendMisconfigured:
    """The submit command's refusal of a time no partition allows (nothing submitted), named
    from the sinfo answer it printed. The request's --time is the person's (REJECTED); a
    --time in [slurm] sbatch_arguments, which sbatch reads after it, is the site's
    (MISCONFIGURED)."""
    said = err[err.index(LIMITS_SAID) + len(LIMITS_SAID) :]
    try:
        refused = time_refusal(
            asked.minutes, asked.partitions, parse_partition_limits(said), asked.asked
        )
    except BackendError:
        refused = None
    why = refused or f"{asked.asked} fits no partition it may use ({' '.join(said.split())})"
    if asked.by_site:
        return BackendMisconfigured(
            why,
            maybe_submitted=False,
            fix=f"lower --time in [slurm] sbatch_arguments of {site_config} to what the "
            "partition allows (`vibesys check` lists the limits)",
        )
    return SubmitRejected(f"{why}: nothing submitted")


#: The registry's names for this adapter's request model and request builder.
Request = SbatchRequest


def _probe_said(err: str) -> bool:
    """The submit command's own word that it stopped at the probe (nothing submitted), not a
    status of 100 or more from sbatch or a wrapper around it."""
    lines = err.strip().splitlines()
    return bool(lines) and lines[-1].startswith(PROBE_SAID)


__all__ = ["Request", "SbatchBackend", "build", "make_request", "prewarm"]
