"""The compute-node check: a tiny batch job proves the nodes see the workspace root.

The check has written a nonce to `<check dir>/ping` under `remote_workspace_root`; the job reads
it on whichever node Slurm gives it and writes it back, with its node's name, to
`<check dir>/pong` (a temporary file renamed into place, so a reply is whole or absent). Seeing
that reply here proves both directions at the same path. With GPU commands on, the same job
also runs `bwrap --version` and the broker's own confinement (`confined_command`) on the node,
and looks for each of `read_only_paths` there.

The wait is bounded: a job still queued or running at the end is cancelled (by its unique
name, so a submission whose answer was lost is cancelled too), and a reply that does not come
within a short grace after the job ended is a failure.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Sequence
from typing import Final

from msgspec import Struct, field

from vibesys.adapters.slurm.parse import parse_sbatch_parsable, parse_squeue, squeue_argv
from vibesys.adapters.slurm.status_rules import is_terminal
from vibesys.adapters.transports import shell_join
from vibesys.errors import BackendUnavailable
from vibesys.osutil.sandbox import Sandbox, confined_command
from vibesys.sitecheck.access import SiteAccess
from vibesys.sitecheck.runner import Found, fail, ok, skipped, warn

__all__ = ["JobProbe", "JobReply", "JobSettings", "bwrap_found", "job_script", "parse_reply"]

REPLY: Final = "pong"
JOB_OUTPUT: Final = "job.out"
#: Between two looks for the reply; squeue is asked at most every `_SQUEUE_EVERY` seconds.
_LOOK_EVERY: Final = 0.25
_SQUEUE_EVERY: Final = 1.0
_READ_REPLY: Final = 'cat -- "$1" 2>/dev/null; exit 0'


class JobSettings(Struct, frozen=True):
    name: str
    check_dir: str
    nonce: str
    sbatch_arguments: tuple[str, ...] = ()
    #: probe bwrap and these read-only paths on the node (GPU commands are on)
    bwrap: bool = False
    read_only_paths: tuple[str, ...] = ()
    wait_seconds: float = 60.0
    grace_seconds: float = 10.0


class JobReply(Struct, frozen=True):
    """What the job wrote back (every `key=value` line; `missing` may repeat)."""

    values: dict[str, str] = field(default_factory=dict)
    missing: tuple[str, ...] = ()

    def get(self, key: str) -> str:
        return self.values.get(key, "")


def job_script(settings: JobSettings) -> str:
    """The batch script (bash), fed to sbatch on stdin."""
    d = shlex.quote(settings.check_dir)
    lines = [
        "#!/bin/bash",
        f"d={d}",
        'nonce=$(cat -- "$d/ping" 2>/dev/null)',
        "{",
        "  printf 'nonce=%s\\n' \"$nonce\"",
        "  printf 'node=%s\\n' \"${SLURMD_NODENAME:-$(hostname)}\"",
    ]
    if settings.bwrap:
        probe = shell_join(_probe_argv(settings.check_dir))
        lines += [
            "  if command -v bwrap >/dev/null 2>&1; then",
            "    printf 'bwrap=%s\\n' \"$(bwrap --version 2>&1 | head -n 1)\"",
            f"    out=$({probe} 2>&1); rc=$?",
            "    printf 'probe_rc=%s\\n' \"$rc\"",
            "    printf 'probe=%s\\n' \"$(printf '%s' \"$out\" | tr '\\n' ' ' | cut -c1-300)\"",
            "  else",
            "    printf 'bwrap=\\n'",
            "  fi",
        ]
        for path in settings.read_only_paths:
            lines.append(
                f"  [ -e {shlex.quote(path)} ] || printf 'missing=%s\\n' {shlex.quote(path)}"
            )
    lines += [f'}} > "$d/{REPLY}.tmp" && mv -f -- "$d/{REPLY}.tmp" "$d/{REPLY}"', ""]
    return "\n".join(lines)


def _probe_argv(check_dir: str) -> tuple[str, ...]:
    """The broker's confinement with the check's directory as the workspace, reading the
    nonce back from inside the sandbox."""
    command = ("cat", f"{check_dir}/ping")
    try:
        return confined_command(Sandbox(workspace=check_dir, cwd=check_dir), command)
    except ValueError:  # a root the broker could not use as a workspace: bwrap alone, then
        return ("bwrap", "--ro-bind", "/", "/", "--cap-drop", "ALL", "--unshare-pid", *command)


def parse_reply(text: str) -> JobReply:
    values: dict[str, str] = {}
    missing: list[str] = []
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        if key == "missing":
            missing.append(value)
        else:
            values.setdefault(key, value)
    return JobReply(values, tuple(missing))


def sbatch_argv(settings: JobSettings) -> list[str]:
    d = settings.check_dir
    return [
        "sbatch",
        "--parsable",
        *settings.sbatch_arguments,
        f"--job-name={settings.name}",
        f"--output={d}/{JOB_OUTPUT}",
        f"--error={d}/{JOB_OUTPUT}",
        f"--chdir={d}",
        "--time=1",
        "--no-requeue",
    ]


class JobProbe(Struct):
    """One run of the job; `reply` is set when it answered."""

    access: SiteAccess
    settings: JobSettings
    root: str
    fix_share: str
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    submitted: bool = False
    settled: bool = False
    job_id: str = ""
    node: str = ""
    reply: JobReply | None = None

    def run(self) -> Found:
        try:
            return self._run()
        except BackendUnavailable as exc:
            # The site stopped answering half-way: whatever was submitted is cancelled by name
            # when the check closes.
            return fail(
                " ".join(exc.evidence.split())[-400:],
                "the site stopped answering during the check (see the rows above); run "
                "vibesys check again",
            )

    def _run(self) -> Found:
        settings = self.settings
        started = self.clock()
        self.submitted = True  # from here on a job may exist: cleanup cancels it by name
        done = self.access.run(sbatch_argv(settings), input=job_script(settings).encode())
        if done.returncode != 0:
            self.settled = True
            reason = " ".join(done.stderr.split())[-300:]
            return fail(
                f"sbatch refused the check's job: {reason}",
                "fix [slurm] sbatch_arguments, or what the account may submit "
                "(`sacctmgr show assoc user=$USER`)",
            )
        self.job_id = parse_sbatch_parsable(done.stdout)
        deadline = started + settings.wait_seconds
        state, reason, ended_at, last_squeue = "PENDING", "", None, float("-inf")
        grace = settings.grace_seconds
        while True:
            text = self._read(f"{settings.check_dir}/{REPLY}")
            now = self.clock()
            if text:
                reply = parse_reply(text)
                self.reply, self.node, self.settled = reply, reply.get("node"), True
                return self._answered(reply, now - started)
            if ended_at is None and now - last_squeue >= _SQUEUE_EVERY:
                last_squeue = now
                state, reason, ended = self._state()
                if ended:
                    # A job that failed never renamed its reply into place; one that completed
                    # did, and a network file system may take a moment to show it here.
                    ended_at = now
                    grace = settings.grace_seconds if state in ("COMPLETED", "ended") else 0.0
            if ended_at is not None and now >= min(deadline, ended_at + grace):
                self.settled = True
                return self._ended_silent(state)
            if now >= deadline:
                return self._late(state, reason, settings.wait_seconds)
            self.sleep(_LOOK_EVERY)

    def _read(self, path: str) -> str:
        done = self.access.run(["sh", "-c", _READ_REPLY, "vibesys-check", path])
        return done.stdout if done.returncode == 0 else ""

    def _state(self) -> tuple[str, str, bool]:
        """The job's state word, squeue's reason, and whether it has ended."""
        done = self.access.run(squeue_argv(job_ids=[self.job_id]))
        rows = [row for row in parse_squeue(done.stdout) if row.job_id == self.job_id]
        if done.returncode != 0 or not rows:
            # Purged already (an invalid id): it ended. A failing squeue proves nothing.
            gone = "Invalid job id" in done.stderr or (done.returncode == 0 and not rows)
            return ("ended", "", True) if gone else ("unknown", "", False)
        row = rows[0]
        if row.nodes and row.nodes not in ("(null)", "N/A"):
            self.node = row.nodes
        return row.state, row.reason or "", is_terminal(row)

    def _answered(self, reply: JobReply, seconds: float) -> Found:
        node = reply.get("node") or "a node"
        where = self.settings.check_dir
        if reply.get("nonce") != self.settings.nonce:
            return fail(
                f"job {self.job_id} on {node} wrote back a reply without the check's nonce (it "
                f"read {reply.get('nonce')!r} from {where}/ping): that node's {self.root} is "
                "not this one",
                self.fix_share,
            )
        return ok(
            f"job {self.job_id} on {node} read the check's file in {self.root} and wrote one "
            f"back there ({seconds:.1f} s from submission)"
        )

    def _ended_silent(self, state: str) -> Found:
        output = self._read(f"{self.settings.check_dir}/{JOB_OUTPUT}")
        said = f"; its output: {' '.join(output.split())[-300:]}" if output.strip() else ""
        where = f" on {self.node}" if self.node else ""
        return fail(
            f"job {self.job_id} ended ({state}){where} without a reply visible in "
            f"{self.settings.check_dir}{said}: the compute nodes do not see {self.root} at the "
            "same path",
            self.fix_share,
        )

    def _late(self, state: str, reason: str, waited: float) -> Found:
        cancelled = self.cancel()
        how = "cancelled" if cancelled else f"NOT cancelled (scancel --name {self.settings.name})"
        if state in ("PENDING", "unknown", "CONFIGURING"):
            why = f", {reason}" if reason else ""
            return warn(
                f"job {self.job_id} was still queued after {waited:g} s ({state}{why}) and "
                f"was {how}: whether the nodes see {self.root} is not proven",
                "run vibesys check again when the partition has room (or with a longer "
                "--job-wait), or name a partition with free nodes in [slurm] sbatch_arguments",
            )
        where = f" on {self.node}" if self.node else ""
        return fail(
            f"job {self.job_id} ran{where} for up to {waited:g} s without a reply visible in "
            f"{self.settings.check_dir} and was {how}",
            self.fix_share,
        )

    def cancel(self) -> bool:
        if self.settled:
            return True
        try:
            done = self.access.run(["scancel", "--name", self.settings.name])
        except BackendUnavailable:
            return False
        self.settled = done.returncode == 0
        return self.settled


def bwrap_found(
    probe: JobProbe, *, enabled: bool, source: str, read_only_paths: Sequence[str]
) -> Found:
    """The bwrap row, from the job's reply."""
    if not enabled:
        return skipped("GPU commands are off (no [vibesys.agent_gpu]): the nodes need no bwrap")
    reply = probe.reply
    if reply is None:
        return skipped(
            "the check's job did not report (see compute-node)", "fix compute-node first"
        )
    node = reply.get("node") or "the node"
    version = reply.get("bwrap")
    if not version:
        return fail(
            f"bwrap is not on PATH on {node}",
            "install bubblewrap on every compute node (a GPU command finds bwrap on the node's "
            "own PATH)",
        )
    if reply.get("probe_rc") != "0" or reply.get("probe") != probe.settings.nonce:
        said = reply.get("probe") or "(no output)"
        return fail(
            f"{version} on {node} cannot confine a command (exit {reply.get('probe_rc')}): {said}",
            "allow unprivileged user namespaces on the nodes (user.max_user_namespaces, "
            "kernel.unprivileged_userns_clone), or install bwrap setuid",
        )
    if reply.missing:
        return fail(
            f"read_only_paths missing on {node}: {', '.join(reply.missing)}",
            "make them exist at the same path on every compute node, or fix "
            f"vibesys.agent_gpu.read_only_paths in {source}",
        )
    listed = f"; read_only_paths present ({len(read_only_paths)})" if read_only_paths else ""
    return ok(
        f"{version} on {node} confines a command to the workspace{listed} (the node the "
        "check's job ran on)"
    )
